package process

import (
	"fmt"
	"io"
	"os"
)

// ring holds the last bytes of one output stream, addressed by absolute offset: bytes
// [start, end) are held, end is everything written so far and start (= bytes dropped from
// the front) grows once more than size bytes were written. Its memory grows with what it holds,
// up to size. Once the stream is complete the held bytes can be moved to a file (release),
// after which reads go to the file and the ring holds no memory. Not safe for concurrent use.
type ring struct {
	size       int   // most bytes held
	base       int64 // offset stored at buf[0] while growing; positions are (o-base) % size
	start, end int64
	buf        []byte // len ≤ size; nil once released
	file       string // where the held bytes are once released
}

// newRing returns an empty ring holding at most size bytes, whose first byte will be at
// offset from.
func newRing(size int, from int64) *ring {
	return &ring{size: size, base: from, start: from, end: from}
}

// write appends p.
func (r *ring) write(p []byte) {
	if len(p) > r.size {
		r.end += int64(len(p) - r.size)
		p = p[len(p)-r.size:]
	}
	if need := r.end - r.base + int64(len(p)); need <= int64(r.size) {
		if int64(len(r.buf)) < need {
			r.grow(int(need))
		}
	} else if len(r.buf) < r.size {
		r.grow(r.size)
	}
	pos := int((r.end - r.base) % int64(r.size))
	n := copy(r.buf[pos:], p)
	copy(r.buf, p[n:])
	r.end += int64(len(p))
	r.start = max(r.start, r.end-int64(r.size))
}

// grow makes len(buf) n (≤ size), doubling the capacity to keep appends amortised.
func (r *ring) grow(n int) {
	if cap(r.buf) >= n {
		r.buf = r.buf[:n]
		return
	}
	nb := make([]byte, n, min(r.size, max(n, 2*cap(r.buf))))
	copy(nb, r.buf)
	r.buf = nb
}

// read returns a copy of up to n held bytes from offset from (start ≤ from ≤ end).
func (r *ring) read(from int64, n int) ([]byte, error) {
	if from < r.start || from > r.end {
		return nil, fmt.Errorf("offset %d outside the held range [%d, %d)", from, r.start, r.end)
	}
	n = int(min(int64(n), r.end-from))
	out := make([]byte, n)
	if n == 0 {
		return out, nil
	}
	if r.buf == nil && r.file != "" {
		f, err := os.Open(r.file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if _, err := f.ReadAt(out, from-r.start); err != nil && err != io.EOF {
			return nil, err
		}
		return out, nil
	}
	pos := int((from - r.base) % int64(r.size))
	k := copy(out, r.buf[pos:])
	copy(out[k:], r.buf)
	return out, nil
}

// held returns a copy of all held bytes.
func (r *ring) held() ([]byte, error) { return r.read(r.start, int(r.end-r.start)) }

// release drops the in-memory bytes; reads then come from file, which must hold exactly the
// held bytes.
func (r *ring) release(file string) {
	r.buf, r.file = nil, file
}
