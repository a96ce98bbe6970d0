package preview

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// DefaultMaxRequestBody is the largest request body the proxy relays into a sandbox, in bytes
// (1 GiB): more than a development server's uploads need, and a bound on what one preview
// visitor can push through hutchd. SetMaxRequestBody changes it. Headers are bounded by the
// listener's http.Server (1 MiB); WebSocket traffic after an upgrade is relayed as bytes, not
// bounded per message (the sandbox's server decides).
const DefaultMaxRequestBody = 1 << 30

// SetMaxRequestBody sets the largest request body relayed, in bytes (n > 0). Call it before
// serving.
func (p *Proxy) SetMaxRequestBody(n int64) {
	if n > 0 {
		p.maxBody = n
	}
}

// bodyKey is the context key of a request's *limitedBody.
type bodyKey struct{}

// limitedBody is a request body cut at the bound; it keeps the error its reads ended with, so
// proxyError can tell a body past the bound from an upstream failure.
type limitedBody struct {
	io.ReadCloser
	mu  sync.Mutex
	err error // guarded by mu
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.mu.Lock()
		b.err = err
		b.mu.Unlock()
	}
	return n, err
}

// overLimit is the bound a request's body went past, or 0.
func overLimit(r *http.Request) int64 {
	b, ok := r.Context().Value(bodyKey{}).(*limitedBody)
	if !ok {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var mbe *http.MaxBytesError
	if errors.As(b.err, &mbe) {
		return mbe.Limit
	}
	return 0
}

// boundBody applies the body bound to r: a body announced larger is answered 413
// REQUEST_TOO_LARGE (the connection closed unread) and ok is false; otherwise the returned
// request's body fails past the bound, which proxyError answers with 413 too.
func (p *Proxy) boundBody(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if r.ContentLength > p.maxBody {
		rc := http.NewResponseController(w)
		_ = rc.EnableFullDuplex()
		_ = rc.SetReadDeadline(time.Now())
		w.Header().Set("Connection", "close")
		writeTooLarge(w, p.maxBody)
		return nil, false
	}
	if r.Body == nil || r.Body == http.NoBody {
		return r, true
	}
	b := &limitedBody{ReadCloser: http.MaxBytesReader(w, r.Body, p.maxBody)}
	r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, b))
	r.Body = b
	return r, true
}

// writeTooLarge answers 413 REQUEST_TOO_LARGE for a body over limit bytes.
func writeTooLarge(w http.ResponseWriter, limit int64) {
	e := errdefs.Newf(errdefs.CodeRequestTooLarge, "preview request body is over %d bytes", limit).With("limit", limit)
	writeEnvelope(w, errdefs.ToEnvelope(e, "preview.proxy"))
}
