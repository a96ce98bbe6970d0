package process

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// ring holds the last bytes of one output stream, addressed by absolute offset: bytes
// [start, end) are held, end is everything written so far and start (= bytes dropped from
// the front) grows once more than size bytes were written. Its memory grows with what it holds,
// up to size. Once the stream is complete the held bytes can be moved to a file (release),
// after which reads go to the file and the ring holds no memory. Not safe for concurrent use.
//
// With a budget, the ring's memory is charged to it: charged bytes are taken (the first
// ones by the caller, see newRing), and the buffer's capacity never exceeds them. When the
// ring needs more and the budget has none left, it stops growing: size becomes what it has
// (at least what it was given at creation) and older bytes are dropped from then on.
type ring struct {
	size       int   // most bytes held
	base       int64 // offset stored at buf[0] while growing; positions are (o-base) % size
	start, end int64
	buf        []byte  // len ≤ size; nil once released
	file       string  // where the held bytes are once released
	fileOff    int64   // the file's byte holding offset start
	budget     *budget // nil: not charged
	charged    int64   // bytes taken from budget for this ring
}

// newRing returns an empty ring holding at most size bytes, whose first byte will be at
// offset from, not charged to any budget.
func newRing(size int, from int64) *ring {
	return &ring{size: size, base: from, start: from, end: from}
}

// newChargedRing is newRing for a ring whose memory is charged to b, of which the caller
// took granted bytes (≤ size) for it already.
func newChargedRing(size int, b *budget, granted int64) *ring {
	r := newRing(size, 0)
	r.budget, r.charged = b, granted
	return r
}

// reserve makes sure the ring may hold need bytes (≤ size) in memory, taking from its budget
// (a doubling of what it has, or just need), or else stops its growth at what it has.
func (r *ring) reserve(need int64) {
	need = min(need, int64(r.size))
	if r.budget == nil || need <= r.charged {
		return
	}
	if target := min(int64(r.size), max(need, 2*r.charged)); r.budget.take(target - r.charged) {
		r.charged = target
		return
	}
	r.charged += r.budget.takeUpTo(need - r.charged)
	if r.charged < need {
		// Out of budget: this is as large as the ring gets. The bytes held so far lie at
		// buf[0:end-base] (it has not wrapped yet), so positions stay valid with the new size.
		r.size = int(r.charged)
	}
}

// capLimit is the most memory the buffer may have.
func (r *ring) capLimit() int {
	if r.budget == nil {
		return r.size
	}
	return int(min(int64(r.size), r.charged))
}

// free gives the ring's memory back to its budget (idempotent); the buffer must no longer
// be used.
func (r *ring) free() {
	r.budget.give(r.charged)
	r.charged = 0
}

// write appends p.
func (r *ring) write(p []byte) {
	if len(r.buf) < r.size {
		r.reserve(r.end - r.base + int64(len(p)))
	}
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
	nb := make([]byte, n, min(r.capLimit(), max(n, 2*cap(r.buf))))
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
		f, err := openLog(r.file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if _, err := f.ReadAt(out, r.fileOff+from-r.start); err != nil && err != io.EOF {
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
	r.buf, r.file, r.fileOff = nil, file, 0
	r.free()
}

// openLog opens a log file for reading: a regular file, never through a symlink (ELOOP) and
// never blocking on a FIFO.
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return f, nil
}
