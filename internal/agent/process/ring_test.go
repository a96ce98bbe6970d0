package process

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestRing writes random pieces into rings of a few sizes and checks the held bytes, the
// offsets and the memory against a plain copy of everything written.
func TestRing(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{1, 7, 64, 1000} {
		r := newRing(size, 0)
		var all []byte
		for i := range 500 {
			n := rng.IntN(size*2 + 3)
			p := make([]byte, n)
			for j := range p {
				p[j] = byte(i + j)
			}
			r.write(p)
			all = append(all, p...)
			if r.end != int64(len(all)) || r.start != max(0, r.end-int64(size)) {
				t.Fatalf("size %d: start %d end %d after %d bytes", size, r.start, r.end, len(all))
			}
			if len(r.buf) > size || cap(r.buf) > size {
				t.Fatalf("size %d: buffer len %d cap %d", size, len(r.buf), cap(r.buf))
			}
			held, err := r.held()
			if err != nil || !bytes.Equal(held, all[r.start:]) {
				t.Fatalf("size %d: held %v %v; want %v", size, held, err, all[r.start:])
			}
			// A read from the middle.
			if r.end > r.start {
				from := r.start + rng.Int64N(r.end-r.start)
				got, err := r.read(from, 5)
				if err != nil || !bytes.Equal(got, all[from:min(from+5, r.end)]) {
					t.Fatalf("size %d: read(%d) = %v %v", size, from, got, err)
				}
			}
		}
		if _, err := r.read(r.start-1, 1); r.start > 0 && err == nil {
			t.Fatal("read below start accepted")
		}
		// Released to a file, the reads are the same.
		path := filepath.Join(t.TempDir(), "log")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.writeTo(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
		want, _ := r.held()
		r.release(path)
		got, err := r.held()
		if err != nil || !bytes.Equal(got, want) || r.buf != nil {
			t.Fatalf("size %d: after release held %v %v; want %v", size, got, err, want)
		}
	}
}

// TestRingGrowsWithContent: a big ring holds only what was written.
func TestRingGrowsWithContent(t *testing.T) {
	r := newRing(MaxLogBytes, 0)
	r.write([]byte("hello"))
	if cap(r.buf) > 64 {
		t.Fatalf("5 bytes took a %d-byte buffer", cap(r.buf))
	}
}
