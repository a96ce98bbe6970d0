package agent

import (
	"encoding/base64"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestUTF8ChunkerEverySplit(t *testing.T) {
	text := "aé€😀z"
	for i := 0; i <= len(text); i++ {
		for j := i; j <= len(text); j++ {
			var c utf8Chunker
			var got strings.Builder
			for _, piece := range []string{text[:i], text[i:j], text[j:]} {
				if ch, ok := c.push([]byte(piece)); ok {
					if ch.base64 || !utf8.ValidString(ch.data) {
						t.Fatalf("split %d,%d: chunk %q (base64 %v)", i, j, ch.data, ch.base64)
					}
					got.WriteString(ch.data)
				}
			}
			if _, ok := c.flush(); ok {
				t.Fatalf("split %d,%d: bytes left over", i, j)
			}
			if got.String() != text {
				t.Fatalf("split %d,%d: got %q", i, j, got.String())
			}
		}
	}
}

func TestUTF8ChunkerInvalid(t *testing.T) {
	tests := []struct {
		name   string
		pieces [][]byte
		want   []chunk
	}{
		{"invalid byte", [][]byte{{'a', 0xff}}, []chunk{{base64.StdEncoding.EncodeToString([]byte{'a', 0xff}), true}}},
		{"truncated at end", [][]byte{{'a', 0xe2, 0x82}}, []chunk{{"a", false}, {base64.StdEncoding.EncodeToString([]byte{0xe2, 0x82}), true}}},
		{"bad continuation", [][]byte{{0xe2, 0x82}, {'x'}}, []chunk{{base64.StdEncoding.EncodeToString([]byte{0xe2, 0x82, 'x'}), true}}},
	}
	for _, tt := range tests {
		var c utf8Chunker
		var got []chunk
		for _, p := range tt.pieces {
			if ch, ok := c.push(p); ok {
				got = append(got, ch)
			}
		}
		if ch, ok := c.flush(); ok {
			got = append(got, ch)
		}
		if len(got) != len(tt.want) {
			t.Fatalf("%s: got %v; want %v", tt.name, got, tt.want)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Fatalf("%s: got %v; want %v", tt.name, got, tt.want)
			}
		}
	}
}
