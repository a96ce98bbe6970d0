package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// failAfter returns r's bytes, then err instead of io.EOF: a reply whose connection was cut.
type failAfter struct {
	r   io.Reader
	err error
}

func (f *failAfter) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, f.err
	}
	return n, err
}

// TestStopsReply: a 5xx reply of the agent met by a stop is the stop's answer when it says no
// more than a failure (INTERNAL_ERROR, no code, not JSON, however long) or was cut part-way; a
// coded failure passes on whole, however long.
func TestStopsReply(t *testing.T) {
	envelope := func(code errdefs.Code, msgLen int) string {
		b, err := json.Marshal(errdefs.Envelope{Code: code, Message: strings.Repeat("m", msgLen), HTTPStatus: 500, Timestamp: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	long := 2 * maxEnvelope
	for _, tc := range []struct {
		name string
		body string
		cut  bool
		down bool
	}{
		{"internal", envelope(errdefs.CodeInternal, 10), false, true},
		{"no code", `{"message":"context canceled"}`, false, true},
		{"not JSON", "upstream went away", false, true},
		{"coded", envelope(errdefs.CodeNoSpace, 10), false, false},
		{"coded, code not first", `{"message":"disk full","code":"NO_SPACE"}`, false, false},
		{"internal, cut part-way", envelope(errdefs.CodeInternal, 10)[:20], true, true},
		{"coded, cut part-way", envelope(errdefs.CodeNoSpace, 10)[:20], true, true},
		{"internal, longer than an envelope", envelope(errdefs.CodeInternal, long), false, true},
		{"not JSON, longer than an envelope", strings.Repeat("x", long), false, true},
		{"coded, longer than an envelope", envelope(errdefs.CodeNoSpace, long), false, false},
		{"coded after a long member", `{"context":{"a":[1,{"b":"` + strings.Repeat("y", long) + `"}]},"code":"NO_SPACE"}`, false, true},
		{"coded after a short member, long", `{"context":{"a":[1,{"b":"c"}]},"code":"NO_SPACE","message":"` + strings.Repeat("y", long) + `"}`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tc.body)
			if tc.cut {
				body = &failAfter{body, syscall.ECONNRESET}
			}
			head, down := stopsReply(body)
			if down != tc.down {
				t.Fatalf("stopsReply(%.60q…) down = %v; want %v", tc.body, down, tc.down)
			}
			if down {
				return
			}
			// A reply passed on is the agent's, whole: what was read, then the rest.
			rest, _ := io.ReadAll(body)
			if got := string(head) + string(rest); got != tc.body {
				t.Fatalf("passed on %d bytes; want the reply's %d", len(got), len(tc.body))
			}
			if len(head) > maxEnvelope+1 || !bytes.HasPrefix([]byte(tc.body), head) {
				t.Fatalf("read %d bytes; want a prefix of at most %d", len(head), maxEnvelope+1)
			}
		})
	}
}
