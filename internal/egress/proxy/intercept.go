package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/egress/webhook"
)

// InterceptConfig enables TLS interception (EGRESS.md §2.3): connections whose Decision is
// policy.Intercept are terminated with a leaf from the sandbox's CA and served per request
// (HTTP/1.1 and HTTP/2 alike) by the request handler of request.go, shared with plain HTTP.
// Without it an Intercept decision refuses the connection (fail closed).
type InterceptConfig struct {
	// Leaf returns the certificate to present for host to sandboxID's clients (mitm.Authority.Leaf).
	Leaf func(ctx context.Context, sandboxID, host string) (*tls.Certificate, error)
	// Secret returns a secret's value at request time (secret.Store.Value).
	Secret func(ctx context.Context, name string) ([]byte, error)
	// RootCAs verify upstream servers; nil means the system roots.
	RootCAs *x509.CertPool
	// Placeholders returns sandboxID's placeholder tokens by secret name (store); nil: none.
	Placeholders func(ctx context.Context, sandboxID string) (map[string]string, error)
	// Handlers are the operator handlers rules of action "handler" name.
	Handlers map[string]*webhook.Handler
	// OnStop, when set, is called (in its own goroutine) when a placeholder violation's
	// action is block_and_stop.
	OnStop func(sandboxID string)
}

// interceptor is the Proxy's interception state.
type interceptor struct {
	cfg  InterceptConfig
	srv  *http.Server
	ln   *chanListener
	meta sync.Map // *tls.Conn → *icMeta

	mu         sync.Mutex
	transports map[string]*http.Transport // per-sandbox TLS upstream pools
}

// icMeta is what the request handler knows about an intercepted connection.
type icMeta struct {
	c   *conn
	sni string
}

type icKey struct{}

func (p *Proxy) newInterceptor(cfg InterceptConfig) *interceptor {
	ic := &interceptor{cfg: cfg, ln: newChanListener(), transports: map[string]*http.Transport{}}
	ic.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serveIntercepted),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*tls.Conn); ok {
				if m, ok := ic.meta.Load(tc); ok {
					return context.WithValue(ctx, icKey{}, m)
				}
			}
			return ctx
		},
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = ic.srv.Serve(ic.ln) // ends when the listener closes
	}()
	return ic
}

// close stops the intercept server and its upstream pools.
func (ic *interceptor) close() {
	ic.ln.Close()
	ic.srv.Close()
	ic.mu.Lock()
	ts := ic.transports
	ic.transports = map[string]*http.Transport{}
	ic.mu.Unlock()
	for _, t := range ts {
		t.CloseIdleConnections()
	}
}

// forget closes sandboxID's upstream pools (public and routed).
func (ic *interceptor) forget(sandboxID string) {
	ic.mu.Lock()
	var ts []*http.Transport
	for k, t := range ic.transports {
		if k == sandboxID || strings.HasPrefix(k, sandboxID+"\x00") {
			ts = append(ts, t)
			delete(ic.transports, k)
		}
	}
	ic.mu.Unlock()
	for _, t := range ts {
		t.CloseIdleConnections()
	}
}

// icTransport returns sandboxID's TLS upstream pool (HTTP/2 when the upstream offers it).
// With a non-empty upstream (an operator route, Config.Upstreams), the pool dials that
// upstream's address for every request, whatever the URL's host: a pool of its own, so a
// routed request never reuses a public connection or the reverse.
func (p *Proxy) icTransport(sandboxID, upstream string) *http.Transport {
	ic := p.icpt
	key := sandboxID
	if upstream != "" {
		key += "\x00" + upstream
	}
	ic.mu.Lock()
	defer ic.mu.Unlock()
	t := ic.transports[key]
	if t == nil {
		dial := p.dial
		if upstream != "" {
			addr := p.cfg.Upstreams[upstream].String()
			dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
				d := net.Dialer{Timeout: dialTimeout}
				return d.DialContext(ctx, "tcp", addr)
			}
		}
		t = &http.Transport{
			Proxy:                 nil,
			DialContext:           dial,
			TLSClientConfig:       &tls.Config{RootCAs: ic.cfg.RootCAs, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2:     true,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   dialTimeout,
			ExpectContinueTimeout: time.Second,
		}
		ic.transports[key] = t
	}
	return t
}

// intercept terminates TLS on c for host with a leaf of the sandbox's CA and hands the
// connection to the intercept server. It returns when the connection is closed.
func (p *Proxy) intercept(c *conn, host string, peeked []byte, log *slog.Logger) {
	ic := p.icpt
	ctx, cancel := context.WithTimeout(context.Background(), helloTimeout) //nolint:forbidigo // a proxied connection is its own root; the timeout bounds it
	leaf, err := ic.cfg.Leaf(ctx, c.sandboxID, host)
	cancel()
	if err != nil {
		log.Warn("egress intercept: no leaf", "err", err)
		p.cfg.Audit(c.sandboxID, audit.Event{Kind: audit.KindConn, Mode: "intercept", Decision: "closed", Host: host,
			Port: int(c.orig.Port()), OrigDst: c.orig.String(), Reason: "no certificate for the host"})
		return
	}
	pc := &prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(peeked), c), closed: make(chan struct{})}
	tc := tls.Server(pc, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"h2", "http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	c.SetDeadline(time.Now().Add(helloTimeout))
	if err := tc.Handshake(); err != nil {
		// Typically the client does not trust the sandbox CA (a pinned or webpki-only client).
		log.Info("egress intercept: client handshake failed", "err", err)
		p.cfg.Audit(c.sandboxID, audit.Event{Kind: audit.KindConn, Mode: "intercept", Decision: "closed", Host: host,
			Port: int(c.orig.Port()), OrigDst: c.orig.String(), Reason: "TLS handshake with the sandbox failed (does the client trust the sandbox CA?)"})
		tc.Close()
		return
	}
	c.SetDeadline(time.Time{})
	_, upstream := p.cfg.Upstreams[host]
	c.setDest(policy.KindTLS, host, true, upstream)
	ic.meta.Store(tc, &icMeta{c: c, sni: host})
	defer ic.meta.Delete(tc)
	if !ic.ln.push(tc) {
		tc.Close()
		return
	}
	log.Debug("egress tls intercepted", "alpn", tc.ConnectionState().NegotiatedProtocol)
	<-pc.closed
}

// prefixConn replays the peeked ClientHello before the rest of the connection and reports
// when it is closed.
type prefixConn struct {
	net.Conn
	r      io.Reader
	once   sync.Once
	closed chan struct{}
}

func (pc *prefixConn) Read(b []byte) (int, error) { return pc.r.Read(b) }

func (pc *prefixConn) Close() error {
	err := pc.Conn.Close()
	pc.once.Do(func() { close(pc.closed) })
	return err
}

// chanListener yields the connections pushed to it.
type chanListener struct {
	ch     chan net.Conn
	done   chan struct{}
	closer sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.closer.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{} }

var errNoIntercept = errors.New("interception is not configured")

// serveIntercepted serves one request on an intercepted TLS connection (HTTP/1.1 or HTTP/2):
// the shared checks (Host must equal the SNI, else 421), then the request handler shared with
// plain HTTP (request.go).
func (p *Proxy) serveIntercepted(w http.ResponseWriter, r *http.Request) {
	m, ok := r.Context().Value(icKey{}).(*icMeta)
	if !ok {
		writeError(w, errdefs.New(errdefs.CodeInternal, "intercepted connection without identity"))
		return
	}
	log := p.log.With("sandbox_id", m.c.sandboxID, "sni", m.sni, "proto", r.Proto)
	rc := reqConn{c: m.c, sni: m.sni}
	host, ok := p.admit(w, r, rc, log)
	if !ok {
		return
	}
	p.handle(w, r, rc, host, log)
}
