package inject

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
)

// chunkReader returns its chunks one per Read.
type chunkReader struct{ chunks [][]byte }

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}
func (c *chunkReader) Close() error { return nil }

func TestRedactorAcrossEverySplit(t *testing.T) {
	secret := []byte("s3cr3t+Value/with=chars")
	r := NewRedactor(Forms(secret, []byte("[redacted:TOK]")))
	forms := []string{string(secret), base64.StdEncoding.EncodeToString(secret), url.QueryEscape(string(secret)), base64.RawURLEncoding.EncodeToString(secret),
		strings.ToUpper(string(secret)), strings.ToLower(string(secret)), hex.EncodeToString(secret), strings.ToUpper(hex.EncodeToString(secret))}
	for _, f := range forms {
		text := []byte("before " + f + " middle " + f + f + " end")
		want := "before [redacted:TOK] middle [redacted:TOK][redacted:TOK] end"
		if got, n := r.String(string(text)); got != want || n != 3 {
			t.Fatalf("String(%q) = %q, %d", text, got, n)
		}
		// Every split point into two and three writes.
		for i := 0; i <= len(text); i++ {
			for j := i; j <= len(text); j += 7 {
				cr := &chunkReader{chunks: [][]byte{append([]byte(nil), text[:i]...), append([]byte(nil), text[i:j]...), append([]byte(nil), text[j:]...)}}
				rr := r.Reader(cr)
				got, err := io.ReadAll(iotest.OneByteReader(rr))
				if err != nil || string(got) != want {
					t.Fatalf("split %d/%d of %q: %q %v", i, j, f, got, err)
				}
				if rr.Count() != 3 {
					t.Fatalf("count %d", rr.Count())
				}
			}
		}
	}
}

func TestRedactorNeverHoldsBackUnrelatedBytes(t *testing.T) {
	r := NewRedactor(Forms([]byte("abcdefgh12345678"), []byte("X")))
	// A chunk ending in a prefix of the secret holds only that prefix back; other text flows.
	pr, pw := io.Pipe()
	rr := r.Reader(pr)
	go pw.Write([]byte("data: event 1\n\n"))
	buf := make([]byte, 100)
	n, err := rr.Read(buf)
	if err != nil || string(buf[:n]) != "data: event 1\n\n" {
		t.Fatalf("first read %q %v", buf[:n], err)
	}
	go pw.Write([]byte("tail abcd"))
	n, _ = rr.Read(buf)
	if string(buf[:n]) != "tail " {
		t.Fatalf("partial match not held back: %q", buf[:n])
	}
	go func() { pw.Write([]byte("efgh12345678!")); pw.Close() }()
	rest, _ := io.ReadAll(rr)
	if string(rest) != "X!" {
		t.Fatalf("rest %q", rest)
	}
	// A prefix that never completes is released at EOF.
	rr = r.Reader(io.NopCloser(strings.NewReader("ends with abcdefg")))
	if got, _ := io.ReadAll(rr); string(got) != "ends with abcdefg" {
		t.Fatalf("eof flush %q", got)
	}
	if NewRedactor(nil) != nil {
		t.Fatal("empty redactor not nil")
	}
	var nilR *Redactor
	if s, n := nilR.String("x"); s != "x" || n != 0 {
		t.Fatal("nil redactor changed text")
	}
	_ = bytes.MinRead
}

func TestPlaceholderShape(t *testing.T) {
	a, b := NewPlaceholder(), NewPlaceholder()
	if a == b || len(a) != PlaceholderLen || !strings.HasPrefix(a, Marker) {
		t.Fatalf("placeholders %q %q", a, b)
	}
	for i := len(Marker); i < len(a); i++ {
		if !IsPlaceholderChar(a[i]) {
			t.Fatalf("bad char in %q", a)
		}
	}
	if url.QueryEscape(a) != a {
		t.Fatal("placeholder changes under URL encoding")
	}
}
