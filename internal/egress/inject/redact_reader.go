package inject

import (
	"io"
	"sync"
	"time"
)

// Reader wraps rc so what is read from it is redacted, across reads: a form split between two
// upstream reads is still found. At most about twice the longest form's length is held back
// between reads, and only while the bytes at the end of what was read could still belong to a
// run to redact. Count reports the replacements made so far.
func (r *Redactor) Reader(rc io.ReadCloser) *RedactReader {
	return &RedactReader{r: r, src: rc}
}

// IdleReader is Reader for an interactive stream (an upgraded connection, where the peer
// waits for a message before it sends more): bytes held back because they could still grow
// into a run to redact are released once no data has come for idle, redacted as if the
// stream ended there. A piece released that way and the data after it are scanned
// separately, so a form cut by a pause of at least idle into pieces each shorter than a run
// to redact gets through (the same bound as a partial reflection).
func (r *Redactor) IdleReader(rc io.ReadCloser, idle time.Duration) *RedactReader {
	rr := &RedactReader{r: r, src: rc, idle: idle, ch: make(chan chunk), done: make(chan struct{})}
	go rr.pump()
	return rr
}

// chunk is one read of the source (IdleReader's pump).
type chunk struct {
	b   []byte
	err error
}

// RedactReader is a streaming redactor (see Redactor.Reader).
type RedactReader struct {
	idle time.Duration // > 0: IdleReader
	ch   chan chunk
	done chan struct{}
	once sync.Once

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
		b, err, idle := rr.next()
		if idle {
			var n int
			rr.obuf, _, n = rr.r.scan(rr.obuf[:0], rr.pending, true)
			rr.out = rr.obuf
			rr.count += n
			rr.pending = rr.pending[:0]
			continue
		}
		rr.pending = append(rr.pending, b...)
		rr.err = err
		if err != nil || len(b) == 0 {
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

// next returns the source's next read, or idle when, for an IdleReader holding bytes back,
// nothing has come for rr.idle.
func (rr *RedactReader) next() (b []byte, err error, idle bool) {
	if rr.idle <= 0 {
		if rr.buf == nil {
			rr.buf = make([]byte, 32<<10)
		}
		n, err := rr.src.Read(rr.buf)
		return rr.buf[:n], err, false
	}
	if len(rr.pending) == 0 {
		c := <-rr.ch
		return c.b, c.err, false
	}
	t := time.NewTimer(rr.idle)
	defer t.Stop()
	select {
	case c := <-rr.ch:
		return c.b, c.err, false
	case <-t.C:
		return nil, nil, true
	}
}

// pump reads the source for an IdleReader until it fails or the reader is closed.
func (rr *RedactReader) pump() {
	for {
		buf := make([]byte, 32<<10)
		n, err := rr.src.Read(buf)
		select {
		case rr.ch <- chunk{b: buf[:n], err: err}:
		case <-rr.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// Close closes the source (and stops an IdleReader's pump).
func (rr *RedactReader) Close() error {
	if rr.done != nil {
		rr.once.Do(func() { close(rr.done) })
	}
	return rr.src.Close()
}

// Count is the number of replacements made so far.
func (rr *RedactReader) Count() int { return rr.count }
