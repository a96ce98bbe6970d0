package inject

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"testing"
)

// BenchmarkRedactReader streams 8 MiB of base64 text (form characters everywhere, the worst
// realistic case for the filter) and 8 MiB of random bytes (like the bench's /big) through a
// redactor armed with two secrets' forms.
func BenchmarkRedactReader(b *testing.B) {
	raw := make([]byte, 6<<20)
	rand.Read(raw)
	bin := make([]byte, 8<<20)
	rand.Read(bin)
	b.Run("base64", func(b *testing.B) { benchRedact(b, []byte(base64.StdEncoding.EncodeToString(raw))) })
	b.Run("binary", func(b *testing.B) { benchRedact(b, bin) })
}

func benchRedact(b *testing.B, data []byte) {
	var pairs []Pair
	pairs = append(pairs, Forms([]byte("tok_live_0123456789abcdefSECRET"), []byte("[redacted:A]"))...)
	pairs = append(pairs, Forms([]byte("sk-REAL-key-0123456789abcdef"), []byte("[redacted:B]"))...)
	r := NewRedactor(pairs)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		rr := r.Reader(io.NopCloser(&sliceReader{b: data}))
		if _, err := io.Copy(io.Discard, rr); err != nil {
			b.Fatal(err)
		}
	}
}

// sliceReader reads b in 32 KiB pieces, as a response body would arrive.
type sliceReader struct{ b []byte }

func (s *sliceReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 32<<10)], s.b)
	s.b = s.b[n:]
	return n, nil
}
