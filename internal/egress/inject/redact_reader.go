package inject

import "io"

// Reader wraps rc so what is read from it is redacted, across reads: a form split between two
// upstream reads is still found. At most about twice the longest form's length is held back
// between reads, and only while the bytes at the end of what was read could still belong to a
// run to redact. Count reports the replacements made so far.
func (r *Redactor) Reader(rc io.ReadCloser) *RedactReader {
	return &RedactReader{r: r, src: rc}
}

// RedactReader is a streaming redactor (see Redactor.Reader).
type RedactReader struct {
	r       *Redactor
	src     io.ReadCloser
	pending []byte // read, not yet released (a possible run at the end)
	out     []byte // redacted, not yet returned (a tail of obuf)
	obuf    []byte
	err     error
	count   int
	buf     []byte
}

// Read returns redacted bytes.
func (rr *RedactReader) Read(p []byte) (int, error) {
	for len(rr.out) == 0 {
		if rr.err != nil {
			if len(rr.pending) > 0 {
				var n int
				rr.obuf, _, n = rr.r.scan(rr.obuf[:0], rr.pending, true)
				rr.out = rr.obuf
				rr.count += n
				rr.pending = nil
				continue
			}
			return 0, rr.err
		}
		if rr.buf == nil {
			rr.buf = make([]byte, 32<<10)
		}
		n, err := rr.src.Read(rr.buf)
		rr.pending = append(rr.pending, rr.buf[:n]...)
		rr.err = err
		if err != nil || n == 0 {
			continue
		}
		var used, cnt int
		rr.obuf, used, cnt = rr.r.scan(rr.obuf[:0], rr.pending, false)
		rr.out = rr.obuf
		rr.count += cnt
		rr.pending = rr.pending[:copy(rr.pending, rr.pending[used:])]
	}
	n := copy(p, rr.out)
	rr.out = rr.out[n:]
	if len(rr.out) == 0 {
		rr.out = nil
	}
	return n, nil
}

// Close closes the source.
func (rr *RedactReader) Close() error { return rr.src.Close() }

// Count is the number of replacements made so far.
func (rr *RedactReader) Count() int { return rr.count }
