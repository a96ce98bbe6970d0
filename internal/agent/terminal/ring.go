package terminal

// ring holds the last size bytes of a terminal's output, addressed by absolute offset: bytes
// [start(), end) are held, end being everything written so far. Its memory grows with what it
// holds, up to size. Not safe for concurrent use.
type ring struct {
	size int
	buf  []byte // len < size while growing (then it holds [0, end) exactly), then len == size
	end  int64
}

func newRing(size int) *ring { return &ring{size: size, buf: make([]byte, 0, min(size, 64<<10))} }

// start is the offset of the oldest byte held.
func (r *ring) start() int64 { return max(0, r.end-int64(r.size)) }

// write appends p, dropping the oldest bytes past size.
func (r *ring) write(p []byte) {
	for len(p) > 0 {
		if len(r.buf) < r.size {
			n := min(len(p), r.size-len(r.buf))
			if cap(r.buf) < len(r.buf)+n {
				grown := make([]byte, len(r.buf), min(r.size, max(2*cap(r.buf), len(r.buf)+n)))
				copy(grown, r.buf)
				r.buf = grown
			}
			r.buf = append(r.buf, p[:n]...)
			r.end += int64(n)
			p = p[n:]
			continue
		}
		pos := int(r.end % int64(r.size))
		n := copy(r.buf[pos:], p)
		r.end += int64(n)
		p = p[n:]
	}
}

// readAt copies held bytes from offset off (start() ≤ off ≤ end) into p and returns how many;
// it may return fewer than are available (it stops at the end of the buffer).
func (r *ring) readAt(off int64, p []byte) int {
	if off < r.start() || off >= r.end {
		return 0
	}
	pos := int(off % int64(r.size))
	n := int(min(int64(len(p)), r.end-off, int64(r.size-pos)))
	return copy(p, r.buf[pos:pos+n])
}
