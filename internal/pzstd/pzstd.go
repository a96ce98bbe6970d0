// Package pzstd compresses a stream with zstd on several cores at once: the input is cut into
// chunks, each chunk becomes an independent zstd frame compressed by its own goroutine
// (klauspost/compress's EncodeAll), and the frames are written in input order. A sequence of
// frames is a standard zstd stream (RFC 8878 §3.1: a decoder reads concatenated frames as one
// stream), so any decoder, klauspost's zstd.Reader and the zstd tool included, reads it.
//
// Why not the library's own concurrent streaming encoder: on the 2-core test host it
// compresses a 311 MB tar of node_modules in ~0.9 s at SpeedFastest whatever its concurrency
// setting, against ~0.48 s for 8 MiB frames compressed in parallel (and ~0.56 s for the C
// `zstd -1 -T0`). The price is a slightly larger output (frames share no history: 50 MiB
// against 49 MiB there).
package pzstd

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// ChunkSize is the input size of one frame, in bytes.
const ChunkSize = 8 << 20

// Writer is an io.WriteCloser that compresses into an underlying writer. It is not safe for
// concurrent use by several goroutines; Close must be called to flush the last frame.
type Writer struct {
	w   io.Writer
	enc *zstd.Encoder
	buf []byte // the chunk being filled

	work  chan *frame // to the compressing goroutines
	order chan *frame // to the writing goroutine, in input order
	pool  sync.Pool   // chunk buffers
	wg    sync.WaitGroup
	done  chan struct{} // closed when the writing goroutine ends

	mu     sync.Mutex
	err    error // the first error of the underlying writer
	closed bool
	sent   bool  // a frame was sent off
	n      int64 // compressed bytes written
}

type frame struct {
	in    []byte
	out   []byte
	ready chan struct{}
}

// NewWriter returns a Writer compressing into w with threads goroutines (0: GOMAXPROCS) at
// level (e.g. zstd.SpeedFastest).
func NewWriter(w io.Writer, threads int, level zstd.EncoderLevel) (*Writer, error) {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(threads),
		zstd.WithEncoderCRC(true))
	if err != nil {
		return nil, fmt.Errorf("pzstd: %w", err)
	}
	z := &Writer{
		w: w, enc: enc,
		work:  make(chan *frame, threads),
		order: make(chan *frame, 2*threads),
		done:  make(chan struct{}),
	}
	z.pool.New = func() any { return make([]byte, 0, ChunkSize) }
	for range threads {
		z.wg.Add(1)
		go z.compress()
	}
	go z.write()
	return z, nil
}

func (z *Writer) compress() {
	defer z.wg.Done()
	for f := range z.work {
		f.out = z.enc.EncodeAll(f.in, nil)
		close(f.ready)
	}
}

func (z *Writer) write() {
	defer close(z.done)
	for f := range z.order {
		<-f.ready
		z.pool.Put(f.in[:0]) //nolint:staticcheck // SA6002: one slice header per multi-MiB chunk is not worth a *[]byte pool
		if z.failed() != nil {
			continue
		}
		n, err := z.w.Write(f.out)
		z.mu.Lock()
		z.n += int64(n)
		if err != nil && z.err == nil {
			z.err = err
		}
		z.mu.Unlock()
	}
}

func (z *Writer) failed() error {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.err
}

// Write buffers p and hands every full chunk to the compressing goroutines. It returns the
// underlying writer's first error, once known.
func (z *Writer) Write(p []byte) (int, error) {
	if z.closed {
		return 0, errors.New("pzstd: write after close")
	}
	if err := z.failed(); err != nil {
		return 0, err
	}
	n := 0
	for len(p) > 0 {
		if z.buf == nil {
			z.buf = z.pool.Get().([]byte)
		}
		k := min(len(p), ChunkSize-len(z.buf))
		z.buf = append(z.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(z.buf) == ChunkSize {
			z.flush()
		}
	}
	return n, nil
}

// ReadFrom copies r into the writer (io.Copy uses it).
func (z *Writer) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	for {
		if err := z.failed(); err != nil {
			return total, err
		}
		if z.buf == nil {
			z.buf = z.pool.Get().([]byte)
		}
		n, err := r.Read(z.buf[len(z.buf):ChunkSize])
		z.buf = z.buf[:len(z.buf)+n]
		total += int64(n)
		if len(z.buf) == ChunkSize {
			z.flush()
		}
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// flush sends the current chunk off (an empty one only when empty is set).
func (z *Writer) flush() { z.send(false) }

func (z *Writer) send(empty bool) {
	if len(z.buf) == 0 && !empty {
		return
	}
	if z.buf == nil {
		z.buf = z.pool.Get().([]byte)
	}
	f := &frame{in: z.buf, ready: make(chan struct{})}
	z.buf, z.sent = nil, true
	z.order <- f
	z.work <- f
}

// Close compresses what is buffered, waits for every frame to be written and returns the
// first error of the underlying writer. It does not close the underlying writer. An empty
// input gives one empty frame, so the output is always a valid zstd stream.
func (z *Writer) Close() error {
	if z.closed {
		return z.failed()
	}
	z.closed = true
	z.send(!z.sent) // the rest; an empty input still gives one (empty) frame
	close(z.work)
	close(z.order)
	z.wg.Wait()
	<-z.done
	return z.failed()
}

// Written returns the number of compressed bytes written to the underlying writer so far.
func (z *Writer) Written() int64 {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.n
}
