package pzstd

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func input(n int) []byte {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		if i%7 == 0 {
			b[i] = byte(r.IntN(256)) // some entropy, mostly compressible
		} else {
			b[i] = byte('a' + i%13)
		}
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 1000, ChunkSize - 1, ChunkSize, ChunkSize + 1, 3*ChunkSize + 12345} {
		for _, viaReadFrom := range []bool{false, true} {
			in := input(n)
			var out bytes.Buffer
			z, err := NewWriter(&out, 2, zstd.SpeedFastest)
			if err != nil {
				t.Fatal(err)
			}
			if viaReadFrom {
				if _, err := z.ReadFrom(bytes.NewReader(in)); err != nil {
					t.Fatal(err)
				}
			} else {
				for off := 0; off < n; off += 100003 { // odd-sized writes across chunk borders
					if _, err := z.Write(in[off:min(off+100003, n)]); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := z.Close(); err != nil {
				t.Fatal(err)
			}
			if z.Written() != int64(out.Len()) {
				t.Errorf("n=%d: Written() = %d, output %d bytes", n, z.Written(), out.Len())
			}
			dec, err := zstd.NewReader(bytes.NewReader(out.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(dec)
			dec.Close()
			if err != nil || !bytes.Equal(got, in) {
				t.Fatalf("n=%d readFrom=%v: decoded %d bytes, %v; want the %d input bytes", n, viaReadFrom, len(got), err, n)
			}
			if path, err := exec.LookPath("zstd"); err == nil && n > 0 && n < 2*ChunkSize {
				cmd := exec.Command(path, "-d", "-q", "-c")
				cmd.Stdin = bytes.NewReader(out.Bytes())
				got, err := cmd.Output()
				if err != nil || !bytes.Equal(got, in) {
					t.Fatalf("n=%d: the zstd tool decoded %d bytes, %v", n, len(got), err)
				}
			}
		}
	}
}

type failWriter struct{ after int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("disk full")
	}
	f.after--
	return len(p), nil
}

// The underlying writer's error comes back from Write or Close, and nothing hangs.
func TestWriterError(t *testing.T) {
	z, err := NewWriter(&failWriter{after: 1}, 2, zstd.SpeedFastest)
	if err != nil {
		t.Fatal(err)
	}
	in := input(5 * ChunkSize)
	var werr error
	for off := 0; off < len(in) && werr == nil; off += ChunkSize / 2 {
		_, werr = z.Write(in[off : off+ChunkSize/2])
	}
	cerr := z.Close()
	if werr == nil && cerr == nil {
		t.Fatal("no error from a failing writer")
	}
	if _, err := z.Write([]byte("x")); err == nil {
		t.Error("Write after Close succeeded")
	}
}
