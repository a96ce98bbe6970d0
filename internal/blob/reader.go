package blob

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hutchdev/hutch/errdefs"
)

// putReader wraps the reader given to Put. It counts bytes, stops with ctx's error once ctx is
// done, and for a known size fails instead of yielding a short or long stream. A long stream is
// detected before its last byte is handed on, so the upload can never complete with it.
type putReader struct {
	ctx  context.Context
	r    io.Reader
	size int64 // -1: unknown
	n    int64
	err  error // sticky
}

func newPutReader(ctx context.Context, r io.Reader, size int64) (*putReader, error) {
	if r == nil {
		return nil, errdefs.New(errdefs.CodeInvalidArgument, "blob put: nil reader")
	}
	if size < -1 {
		return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "blob put: invalid size %d (want ≥ 0, or -1 for unknown)", size)
	}
	p := &putReader{ctx: ctx, r: r, size: size}
	if size == 0 {
		// Nothing will be read for an empty blob: check now that the source is empty.
		if err := p.probeEnd(); !errors.Is(err, io.EOF) {
			return nil, err
		}
	}
	return p, nil
}

// errSourceSize is the cause when the reader's length differs from the declared size.
var errSourceSize = errors.New("reader length differs from the declared size")

func (p *putReader) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	if err := p.ctx.Err(); err != nil {
		p.err = fmt.Errorf("blob put cancelled: %w", err)
		return 0, p.err
	}
	if p.size >= 0 {
		rest := p.size - p.n
		if rest == 0 {
			return 0, p.probeEnd()
		}
		if int64(len(b)) > rest {
			b = b[:rest]
		}
	}
	n, err := p.r.Read(b)
	p.n += int64(n)
	if p.size < 0 {
		if err != nil && err != io.EOF {
			p.err = fmt.Errorf("blob put: reading source: %w", err)
			return n, p.err
		}
		return n, err
	}
	switch {
	case err == io.EOF && p.n < p.size:
		p.err = errdefs.Newf(errdefs.CodeInvalidArgument, "blob put: source ended after %d of %d bytes: %w", p.n, p.size, errSourceSize)
		return n, p.err
	case err != nil && err != io.EOF:
		p.err = fmt.Errorf("blob put: reading source: %w", err)
		return n, p.err
	case p.n == p.size:
		// Last bytes: make sure the source ends here before handing them on.
		if perr := p.probeEnd(); !errors.Is(perr, io.EOF) {
			return n, perr
		}
		return n, io.EOF
	}
	return n, nil
}

// probeEnd reads one more byte once size bytes have been read: io.EOF if the source has ended,
// else a sticky error.
func (p *putReader) probeEnd() error {
	var one [1]byte
	for i := 0; i < 100; i++ {
		n, err := p.r.Read(one[:])
		if n > 0 {
			p.err = errdefs.Newf(errdefs.CodeInvalidArgument, "blob put: source is longer than the declared %d bytes: %w", p.size, errSourceSize)
			return p.err
		}
		if err == io.EOF {
			return io.EOF
		}
		if err != nil {
			p.err = fmt.Errorf("blob put: reading source: %w", err)
			return p.err
		}
	}
	p.err = fmt.Errorf("blob put: source returned no data and no EOF: %w", io.ErrNoProgress)
	return p.err
}
