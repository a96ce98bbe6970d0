package lines

import (
	"strings"
	"testing"
)

func TestWriter(t *testing.T) {
	var got []string
	w := NewWriter(func(l string) { got = append(got, l) })
	for _, chunk := range []string{"a", "b\r\nc\n", "", "d\ne", "f"} {
		if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", chunk, n, err)
		}
	}
	w.Flush()
	if strings.Join(got, "|") != "ab|c|d|ef" {
		t.Fatalf("lines = %q; want [ab c d ef]", got)
	}
}
