package preview

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/connlimit"
	"github.com/hutchdev/hutch/internal/sandboxid"
	"github.com/hutchdev/hutch/internal/store"
)

// Dialer connects to a port inside a sandbox, starting the sandbox if it is stopped;
// *sandbox.Manager implements it. Unknown sandbox → SANDBOX_NOT_FOUND; nothing listening → an
// error matching syscall.ECONNREFUSED.
type Dialer interface {
	DialPort(ctx context.Context, id sandboxid.ID, port int) (net.Conn, error)
	// Touch records a preview request as activity on a running sandbox (requests on pooled
	// connections do not dial).
	Touch(id sandboxid.ID)
	// Hold keeps the sandbox from going to sleep until release is called (and counts as
	// activity at both ends): the proxy holds it for each request's whole duration, streamed
	// replies and WebSocket connections included.
	Hold(id sandboxid.ID) (release func())
}

// PortLookup finds an exposed port's record; *store.Store implements it. Not exposed →
// PORT_NOT_EXPOSED.
type PortLookup interface {
	GetPort(ctx context.Context, sandboxID string, port int) (store.Port, error)
}

// Headers the proxy sets on requests to the sandbox (besides X-Forwarded-For, -Host, -Proto).
const (
	HeaderOriginalURL = "X-Original-URL" // the full URL the client asked for
	HeaderSandboxName = "X-Sandbox-Name" // the sandbox ID
)

// Proxy is the preview listener's http.Handler. It is safe for concurrent use.
type Proxy struct {
	domain    string
	ports     PortLookup
	dialer    Dialer
	log       *slog.Logger
	transport *http.Transport
	rp        *httputil.ReverseProxy
	maxBody   int64 // bytes of request body relayed (limit.go)

	dialsMu sync.Mutex
	dials   map[string]chan struct{} // per sandbox: a slot per dial in progress
}

// Limits of the connections the proxy makes into sandboxes. A sandbox decides how long a dial
// or a reply's headers take, so each is bounded: a sandbox that never accepts must not pile up
// waiting dials (and their sockets) in hutchd.
const (
	// DialTimeout bounds the wait for a dial slot.
	DialTimeout = 10 * time.Second
	// MaxDialsPerSandbox is how many connects into one sandbox may be in progress at once;
	// further requests wait for a slot (within DialTimeout).
	MaxDialsPerSandbox = 64
	// MaxResponseHeaderBytes bounds the headers of a sandbox's reply.
	MaxResponseHeaderBytes = 1 << 20
)

// targetKey is the context key of the routed Target.
type targetKey struct{}

// NewProxy returns a Proxy for hosts under domain. Its one shared transport pools keep-alive
// connections per sandbox and port (the URL host of an outgoing request is "<id>:<port>", and
// the transport dials it with dialer).
func NewProxy(domain string, ports PortLookup, dialer Dialer, log *slog.Logger) *Proxy {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{domain: domain, ports: ports, dialer: dialer, log: log, dials: map[string]chan struct{}{}, maxBody: DefaultMaxRequestBody}
	p.transport = &http.Transport{
		Proxy:                  nil,
		DialContext:            p.dial,
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    128,
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true, // pass Accept-Encoding and bodies through as they are
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       p.rewrite,
		Transport:     p.transport,
		FlushInterval: -1,
		BufferPool:    bufferPool{},
		ErrorHandler:  p.proxyError,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return p
}

// Close closes the pooled idle connections to sandboxes.
func (p *Proxy) Close() { p.transport.CloseIdleConnections() }

// ServeHTTP routes a preview request: unparsable host, unknown sandbox, unexposed port or wrong
// token → 404 INVALID_TOKEN (always the same reply); else the request is proxied to the
// sandbox, which is held awake (Dialer.Hold) until the request, its streamed reply or its
// WebSocket ends. The port not answering → 502 SERVICE_NOT_RESPONDING.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t, ok := ParseHost(r.Host, p.domain)
	if !ok || !p.tokenMatches(r.Context(), t) {
		refuse(w)
		return
	}
	// The visitor knows the URL's token: its connection is no longer one of its address's
	// capped unrouted connections, and is closed to make room only when idle; one sandbox's
	// URLs trust a capped number of connections, so holding them cannot lock out the others'
	// visitors (internal/connlimit).
	connlimit.TrustKey(r.Context(), t.SandboxID.String())
	r, ok = p.boundBody(w, r)
	if !ok {
		return
	}
	p.dialer.Touch(t.SandboxID)
	release := p.dialer.Hold(t.SandboxID)
	defer release()
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, t)))
}

// tokenMatches looks up the token of t's port and compares it with t.Token in constant time.
// Lookup failures compare against a dummy, so every miss costs about the same.
func (p *Proxy) tokenMatches(ctx context.Context, t Target) bool {
	want := "\x00invalid-token\x00"
	rec, err := p.ports.GetPort(ctx, t.SandboxID.String(), t.Port)
	switch {
	case err == nil:
		want = rec.Token
	case !errdefs.IsCode(err, errdefs.CodePortNotExposed):
		if ctx.Err() == nil { // a client that left mid-lookup is not worth a warning
			p.log.WarnContext(ctx, "preview token lookup", "sandbox_id", t.SandboxID, "port", t.Port, "err", err)
		}
	}
	match := subtle.ConstantTimeCompare([]byte(t.Token), []byte(want)) == 1
	return match && err == nil
}

func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(targetKey{}).(Target)
	scheme := "http"
	if pr.In.TLS != nil {
		scheme = "https"
	}
	// Keep the client's X-Forwarded-For chain and append the client's address to it.
	if xff, ok := pr.In.Header["X-Forwarded-For"]; ok {
		pr.Out.Header["X-Forwarded-For"] = append([]string(nil), xff...)
	}
	pr.SetXForwarded() // X-Forwarded-For, X-Forwarded-Host (the preview host), X-Forwarded-Proto
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = net.JoinHostPort(t.SandboxID.String(), strconv.Itoa(t.Port)) // the pool key; see dial
	pr.Out.Host = "localhost:" + strconv.Itoa(t.Port)
	pr.Out.Header.Set(HeaderOriginalURL, scheme+"://"+pr.In.Host+pr.In.URL.RequestURI())
	pr.Out.Header.Set(HeaderSandboxName, t.SandboxID.String())
}

// dial connects the transport's "<id>:<port>" address inside the sandbox.
func (p *Proxy) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	id, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("preview: dial %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("preview: dial %q: %w", addr, err)
	}
	// The host is the pool key rewrite made from a parsed Target: checked again all the same.
	sid, err := sandboxid.Parse(id)
	if err != nil {
		return nil, fmt.Errorf("preview: dial %q: %w", addr, err)
	}
	release, err := p.dialSlot(ctx, id)
	if err != nil {
		return nil, err
	}
	defer release()
	return p.dialer.DialPort(ctx, sid, port)
}

// dialSlot waits (at most DialTimeout) for one of the sandbox's MaxDialsPerSandbox dial slots
// and returns its release. The connect itself is bounded by the Dialer (sandbox.ConnectTimeout).
func (p *Proxy) dialSlot(ctx context.Context, id string) (func(), error) {
	p.dialsMu.Lock()
	sem := p.dials[id]
	if sem == nil {
		sem = make(chan struct{}, MaxDialsPerSandbox)
		p.dials[id] = sem
	}
	p.dialsMu.Unlock()
	timer := time.NewTimer(DialTimeout)
	defer timer.Stop()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		return nil, fmt.Errorf("preview: %d connects into sandbox %q already waiting: %w", MaxDialsPerSandbox, id, context.DeadlineExceeded)
	}
}

// proxyError answers a request whose upstream failed before a response started.
func (p *Proxy) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	t, _ := r.Context().Value(targetKey{}).(Target)
	if errors.Is(r.Context().Err(), context.Canceled) {
		p.log.DebugContext(r.Context(), "preview client went away", "sandbox_id", t.SandboxID, "port", t.Port, "err", err)
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	if limit := overLimit(r); limit > 0 {
		writeTooLarge(w, limit)
		return
	}
	switch code := errdefs.CodeOf(err); {
	case code == errdefs.CodeSandboxNotFound:
		// Destroyed between the token check and the dial: like any other unknown sandbox.
		writeNotFound(w)
		return
	case code != errdefs.CodeInternal && code != errdefs.CodeNotFound:
		// A classified failure such as SANDBOX_START_FAILED keeps its code, but preview
		// visitors are not API clients: the details (agent log, host paths) only go to the log.
		p.log.WarnContext(r.Context(), "preview upstream", "sandbox_id", t.SandboxID, "port", t.Port, "err", err)
		e := errdefs.Newf(code, "sandbox %q cannot serve this request now (%s)", t.SandboxID, code)
		writeEnvelope(w, errdefs.ToEnvelope(e, "preview.proxy"))
		return
	}
	p.log.DebugContext(r.Context(), "preview upstream not responding", "sandbox_id", t.SandboxID, "port", t.Port, "err", err)
	e := errdefs.Newf(errdefs.CodeServiceNotResponding, "nothing answers on port %d in sandbox %q: start a server listening on it", t.Port, t.SandboxID).
		With("port", t.Port).With("id", t.SandboxID)
	writeEnvelope(w, errdefs.ToEnvelope(e, "preview.proxy"))
}

// bufferPool recycles the proxy's 32 KiB copy buffers.
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *copyBuffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }

// refuse answers a request that does not route with the one 404, and closes the connection
// instead of reading a body the client announced (which it may never send).
func refuse(w http.ResponseWriter) {
	// net/http would otherwise try to read up to 256 KiB of the unread body, before writing
	// the reply or after it, and wait for it forever: no more reading from this connection.
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	_ = rc.SetReadDeadline(time.Now())
	w.Header().Set("Connection", "close")
	writeNotFound(w)
}

// errNotFound is the one reply for every preview request that does not route.
var errNotFound = errdefs.New(errdefs.CodeInvalidToken, "preview URL not found")

func writeNotFound(w http.ResponseWriter) {
	writeEnvelope(w, errdefs.ToEnvelope(errNotFound, ""))
}

func writeEnvelope(w http.ResponseWriter, env errdefs.Envelope) {
	b, _ := json.Marshal(env)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(env.HTTPStatus)
	_, _ = w.Write(append(b, '\n'))
}
