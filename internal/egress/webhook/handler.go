// Package webhook forwards intercepted sandbox requests to operator-declared HTTP endpoints
// (EGRESS.md §5.3): a rule of action "handler" names one. The request keeps its method, path,
// query, headers (minus hop-by-hop and inbound Hutch-*) and streamed body; hutchd adds the
// Hutch-Forwarded-* headers, Hutch-Sandbox, Hutch-Request-Id, Hutch-Timestamp and an HMAC
// Hutch-Signature (client/egresshandler verifies it). The handler's response (status,
// headers, 1xx and trailers minus Hutch-*, streamed body, 101 upgrades) goes back to the
// sandbox.
//
// Handler URLs are http(s)://host[:port][/base] or unix:/path/to.sock. They are operator
// configuration, dialled without the sandbox address floor.
package webhook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/egresshandler"
	"github.com/hutchdev/hutch/errdefs"
)

// DefaultHeaderTimeout bounds the wait for a handler's response headers.
const DefaultHeaderTimeout = 60 * time.Second

// Config declares one handler (hutchd config "egressHandlers").
type Config struct {
	// URL is http(s)://host[:port][/base] or unix:/absolute/path.sock.
	URL string `json:"url"`
	// SigningSecret names the secret (internal/secret) that keys the HMAC.
	SigningSecret string `json:"signingSecret"`
	// HeaderTimeout bounds the wait for response headers (Go duration; default 60s).
	HeaderTimeout string `json:"headerTimeout,omitempty"`
}

// Handler is one configured handler. Safe for concurrent use.
type Handler struct {
	Name   string
	secret string
	base   *url.URL // scheme, host and base path the request path is appended to
	rt     *http.Transport
}

// New checks cfg and returns the Handler. Errors: errdefs.ErrInvalidArgument.
func New(name string, cfg Config) (*Handler, error) {
	if cfg.SigningSecret == "" {
		return nil, fmt.Errorf("egress handler %q: signingSecret is required: %w", name, errdefs.ErrInvalidArgument)
	}
	timeout := DefaultHeaderTimeout
	if cfg.HeaderTimeout != "" {
		d, err := time.ParseDuration(cfg.HeaderTimeout)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("egress handler %q: headerTimeout %q: %w", name, cfg.HeaderTimeout, errdefs.ErrInvalidArgument)
		}
		timeout = d
	}
	h := &Handler{Name: name, secret: cfg.SigningSecret}
	tr := &http.Transport{Proxy: nil, ResponseHeaderTimeout: timeout, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true}
	if path, ok := strings.CutPrefix(cfg.URL, "unix:"); ok {
		if !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("egress handler %q: unix socket path must be absolute: %w", name, errdefs.ErrInvalidArgument)
		}
		var d net.Dialer
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", path) }
		h.base = &url.URL{Scheme: "http", Host: "handler"}
	} else {
		u, err := url.Parse(cfg.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.User != nil {
			return nil, fmt.Errorf("egress handler %q: url %q: want http(s)://host[:port][/base] or unix:/path: %w", name, cfg.URL, errdefs.ErrInvalidArgument)
		}
		h.base = u
	}
	h.rt = tr
	return h, nil
}

// NewAll returns the handlers cfgs declares, by name (New of each).
func NewAll(cfgs map[string]Config) (map[string]*Handler, error) {
	out := make(map[string]*Handler, len(cfgs))
	for name, c := range cfgs {
		h, err := New(name, c)
		if err != nil {
			return nil, err
		}
		out[name] = h
	}
	return out, nil
}

// SigningSecret is the name of the secret keying the signature.
func (h *Handler) SigningSecret() string { return h.secret }

// Close drops idle connections.
func (h *Handler) Close() { h.rt.CloseIdleConnections() }

// Origin is where the sandbox meant the request to go.
type Origin struct {
	Sandbox string
	Scheme  string // "https" or "http"
	Host    string // canonical host
	Port    int
}

// Forward sends r (already stripped of the sandbox's Hutch-* headers) to the handler, signed
// with key, and streams the reply to w. Errors answer 502 EGRESS_HANDLER_UNAVAILABLE or 504
// EGRESS_HANDLER_TIMEOUT through writeErr; the returned status is what the sandbox got.
func (h *Handler) Forward(w http.ResponseWriter, r *http.Request, o Origin, key []byte, writeErr func(http.ResponseWriter, error)) int {
	idb := make([]byte, 12)
	rand.Read(idb)
	reqID := hex.EncodeToString(idb)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	pathQuery := r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		pathQuery += "?" + r.URL.RawQuery
	}
	port := strconv.Itoa(o.Port)
	sig := egresshandler.Sign(key, egresshandler.Canonical(ts, reqID, o.Sandbox, r.Method, o.Scheme, o.Host, port, pathQuery))
	status := 0
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = h.base.Scheme
			pr.Out.URL.Host = h.base.Host
			pr.Out.URL.Path = strings.TrimSuffix(h.base.Path, "/") + pr.In.URL.Path
			pr.Out.URL.RawPath = ""
			if pr.In.URL.RawPath != "" {
				pr.Out.URL.RawPath = strings.TrimSuffix(h.base.EscapedPath(), "/") + pr.In.URL.RawPath
			}
			pr.Out.Host = h.base.Host
			oh := pr.Out.Header
			oh.Set(egresshandler.HeaderHost, o.Host)
			oh.Set(egresshandler.HeaderScheme, o.Scheme)
			oh.Set(egresshandler.HeaderPort, port)
			oh.Set(egresshandler.HeaderPath, pathQuery)
			oh.Set(egresshandler.HeaderSandbox, o.Sandbox)
			oh.Set(egresshandler.HeaderRequestID, reqID)
			oh.Set(egresshandler.HeaderTimestamp, ts)
			oh.Set(egresshandler.HeaderSignature, sig)
		},
		Transport:     h.rt,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			status = resp.StatusCode
			dropHutch(resp.Header)
			// Declared trailer names are announced before the body; values (and undeclared
			// trailers) come with its end.
			dropHutch(resp.Trailer)
			if resp.StatusCode != http.StatusSwitchingProtocols {
				resp.Body = &trailerGuard{ReadCloser: resp.Body, resp: resp}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				status = http.StatusGatewayTimeout
				writeErr(w, errdefs.Wrap(errdefs.CodeEgressHandlerTimeout, err, "handler "+strconv.Quote(h.Name)+" sent no response in time"))
				return
			}
			status = http.StatusBadGateway
			writeErr(w, errdefs.Wrap(errdefs.CodeEgressHandlerUnavailable, err, "handler "+strconv.Quote(h.Name)+" is unavailable"))
		},
	}
	rp.ServeHTTP(&infoFilter{ResponseWriter: w}, r)
	return status
}

// dropHutch deletes h's Hutch-* fields: the sandbox must not take a handler's header for
// hutchd's own (Hutch-Egress-Denied...).
func dropHutch(h http.Header) {
	for k := range h {
		if strings.HasPrefix(strings.ToLower(k), "hutch-") {
			delete(h, k)
		}
	}
}

// trailerGuard drops the Hutch-* trailers of resp when its body ends, before the
// ReverseProxy copies them to the sandbox.
type trailerGuard struct {
	io.ReadCloser
	resp *http.Response
}

func (g *trailerGuard) Read(p []byte) (int, error) {
	n, err := g.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		dropHutch(g.resp.Trailer)
	}
	return n, err
}

// infoFilter drops Hutch-* fields from the informational (1xx) responses the ReverseProxy
// forwards: it writes them from its transport trace hook, outside ModifyResponse. 101 is a
// final response (ModifyResponse saw it). Unwrap lets http.ResponseController reach the
// wrapped writer's Flush and Hijack.
type infoFilter struct {
	http.ResponseWriter
}

func (f *infoFilter) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		dropHutch(f.ResponseWriter.Header())
	}
	f.ResponseWriter.WriteHeader(code)
}

func (f *infoFilter) Unwrap() http.ResponseWriter { return f.ResponseWriter }
