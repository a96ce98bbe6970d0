package agent

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestWriteJSONBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := [][]byte{nil, []byte("plain"), []byte("quote\" back\\ nl\n cr\r tab\t nul\x00 bell\x07 del\x7f é 😀 \u2028")}
	for range 300 {
		var sb strings.Builder
		for range r.IntN(200) {
			switch r.IntN(4) {
			case 0:
				sb.WriteByte(byte(r.IntN(0x20)))
			case 1:
				sb.WriteString(`"\`)
			default:
				sb.WriteRune(rune(r.IntN(0x2FFFF)))
			}
		}
		cases = append(cases, []byte(strings.ToValidUTF8(sb.String(), "?")))
	}
	for _, c := range cases {
		for _, enc := range []string{"", "base64"} {
			var buf bytes.Buffer
			w := bufio.NewWriter(&buf)
			writeJSONBytes(w, c, enc)
			w.Flush()
			var got string
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("writeJSONBytes(%q, %q) = %s: not JSON: %v", c, enc, buf.Bytes(), err)
			}
			want := string(c)
			if enc == "base64" {
				want = base64.StdEncoding.EncodeToString(c)
			}
			if got != want || !utf8.ValidString(got) {
				t.Fatalf("round trip of %q (%s) = %q", c, enc, got)
			}
		}
	}
}
