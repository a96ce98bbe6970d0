// Package proxy is hutchd's transparent egress proxy for sandboxes: the egress firewall
// redirects a sandbox's TCP 80 to the HTTP listener and TCP 443 to the TLS listener.
//
// Per connection: the sandbox is identified by the remote address (unknown → close), the
// connection must have arrived on that sandbox's gateway address, and the original destination
// comes from SO_ORIGINAL_DST (a connection that was not redirected is closed). The destination
// NAME comes from the HTTP Host header or the TLS SNI; a missing name or an IP literal is
// refused. The Policy (internal/egress/policy) is asked; then the proxy dials the name it
// authorised, on the original destination port, resolving it itself through a guarded dialer
// that refuses floor addresses (internal/egress/floor) at connect time. It never dials the
// address the sandbox chose. Operator upstreams are dialled at their configured address
// instead, without the floor check.
//
// HTTP is proxied per request (httputil.ReverseProxy: streaming, WebSocket upgrades, one
// upstream connection pool per sandbox) by one request handler shared by plain HTTP and
// intercepted TLS (request.go): per-request rules, placeholders, handlers and routes apply
// the same way on both. A plain-HTTP request that carries a secret (injected or swapped in)
// is sent upstream over TLS on port 443, never in clear text. Refusals answer 403 with a JSON
// errdefs envelope, code EGRESS_DENIED; unreachable upstreams answer 502
// EGRESS_UPSTREAM_FAILED.
//
// TLS is not decrypted: the ClientHello is read (up to 16 KiB, 10 s), parsed by crypto/tls to
// get the SNI, then replayed to the upstream and the bytes are spliced both ways. Refusals
// close the connection.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/connlimit"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/blocked"
	"github.com/hutchdev/hutch/internal/egress/policy"
)

// Timeouts.
const (
	dialTimeout       = 30 * time.Second
	helloTimeout      = 10 * time.Second
	readHeaderTimeout = 30 * time.Second
	idleTimeout       = 5 * time.Minute
	maxHeaderBytes    = 64 << 10
)

// Config configures a Proxy. Identify and Floor are required.
type Config struct {
	// Identify maps a connection's remote address to its sandbox and that sandbox's gateway.
	Identify func(remote netip.Addr) (sandboxID string, gateway netip.Addr, ok bool)
	// Upstreams maps canonical host names to the "ip:port" the proxy dials for them, whatever
	// port the sandbox used; they bypass the blocked. The proxy does not modify the map.
	Upstreams map[string]netip.AddrPort
	// Policy decides per request/connection; nil means policy.AllowPublic.
	Policy policy.Policy
	// Floor refuses destination addresses at connect time.
	Floor *blocked.Floor
	// Resolver resolves destination names; nil means net.DefaultResolver.
	Resolver *net.Resolver
	// Intercept enables TLS interception for policy.Intercept decisions (intercept.go); nil:
	// such connections are refused.
	Intercept *InterceptConfig
	// Pins is the pin table the other-port listener decides by (StartOther); DNS fills it.
	Pins *Pins
	// Audit, when set, receives conn and http audit events; it must not block.
	Audit func(sandboxID string, e audit.Event)
	// Mark, when non-zero, is set as SO_MARK on guarded (sandbox-driven) upstream sockets, so
	// the firewall's output chain can repeat the floor check in the kernel.
	Mark int
	// MaxConns is how many connections all sandboxes together may hold open; 0 or more than
	// MaxConns means MaxConns.
	MaxConns int
}

// Proxy serves the HTTP and TLS listeners. Create with New, start with StartHTTP/StartTLS, stop
// with Close.
type Proxy struct {
	cfg  Config
	log  *slog.Logger
	http *http.Server
	// maxConns is Config.MaxConns, defaulted.
	maxConns int

	mu sync.Mutex
	// transports are the per-sandbox upstream pools for HTTP.
	transports map[string]*http.Transport
	// conns are the open sandbox connections, by sandbox ID.
	conns map[string]map[*conn]struct{}
	// open is how many connections conns holds in all.
	open int
	// listeners are the listeners being served.
	listeners []net.Listener
	// closed is set by Close.
	closed bool
	// redactors are the per-sandbox response redactors (see sandboxRedactor).
	redactors map[string]cachedRedactor

	wg sync.WaitGroup // accept loops and TLS handlers

	icpt *interceptor // nil without Config.Intercept
}

// New returns a Proxy for cfg.
func New(cfg Config, log *slog.Logger) (*Proxy, error) {
	if cfg.Identify == nil || cfg.Floor == nil {
		return nil, errors.New("proxy: Identify and Floor are required")
	}
	if cfg.Policy == nil {
		cfg.Policy = policy.AllowPublic{}
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Audit == nil {
		cfg.Audit = func(string, audit.Event) {}
	}
	p := &Proxy{cfg: cfg, log: log, maxConns: MaxConns, transports: map[string]*http.Transport{}, conns: map[string]map[*conn]struct{}{}}
	if cfg.MaxConns > 0 && cfg.MaxConns < MaxConns {
		p.maxConns = cfg.MaxConns
	}
	if cfg.Intercept != nil {
		p.icpt = p.newInterceptor(*cfg.Intercept)
	}
	p.http = &http.Server{
		Handler:           http.HandlerFunc(p.serveRequest),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if cc, ok := c.(*conn); ok {
				return context.WithValue(ctx, connKey{}, cc)
			}
			return ctx
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return p, nil
}

type connKey struct{}

// StartHTTP serves transparent HTTP on ln in the background. The Proxy owns ln.
func (p *Proxy) StartHTTP(ln net.Listener) error {
	il, err := p.track(ln)
	if err != nil {
		return err
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := p.http.Serve(il); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("egress http proxy stopped", "err", err)
		}
	}()
	return nil
}

// StartTLS serves the TLS splice on ln in the background. The Proxy owns ln.
func (p *Proxy) StartTLS(ln net.Listener) error { return p.serveConns(ln, "tls", p.serveTLS) }

// serveConns accepts on ln (tracked, so connections carry their sandbox) in the background
// and runs serve for each connection in its own goroutine until ln is closed: the tracked
// listener retries every other accept error (connlimit.Retrying), so running out of
// descriptors pauses the loop instead of ending it.
func (p *Proxy) serveConns(ln net.Listener, what string, serve func(*conn)) error {
	il, err := p.track(ln)
	if err != nil {
		return err
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := il.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					p.log.Error("egress "+what+" proxy stopped", "err", err)
				}
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				serve(c.(*conn))
			}()
		}
	}()
	return nil
}

func (p *Proxy) track(ln net.Listener) (*identListener, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("proxy: %w", net.ErrClosed)
	}
	p.listeners = append(p.listeners, ln)
	return &identListener{Listener: connlimit.Retrying(ln, "egress", p.log), p: p}, nil
}

// ForgetSandbox closes every open connection of sandboxID and its idle upstream connections.
// Call it when a sandbox is removed or its policy tightens.
func (p *Proxy) ForgetSandbox(sandboxID string) {
	p.mu.Lock()
	t := p.transports[sandboxID]
	delete(p.transports, sandboxID)
	delete(p.redactors, sandboxID)
	var cs []*conn
	for c := range p.conns[sandboxID] {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	if t != nil {
		t.CloseIdleConnections()
	}
	if p.icpt != nil {
		p.icpt.forget(sandboxID)
	}
	for _, c := range cs {
		c.Close()
	}
}

// Close stops the listeners, closes every sandbox connection and waits for handlers to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	lns := p.listeners
	p.listeners = nil
	var ids []string
	for id := range p.conns {
		ids = append(ids, id)
	}
	for id := range p.transports {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	err := p.http.Close()
	if p.icpt != nil {
		p.icpt.close()
	}
	for _, ln := range lns {
		ln.Close()
	}
	for _, id := range ids {
		p.ForgetSandbox(id)
	}
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// transport returns sandboxID's upstream pool.
func (p *Proxy) transport(sandboxID string) *http.Transport {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.transports[sandboxID]
	if t == nil {
		t = &http.Transport{
			Proxy:                 nil, // never follow the host's proxy environment
			DialContext:           p.dial,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
			DisableCompression:    true,
		}
		p.transports[sandboxID] = t
	}
	return t
}
