package proxy

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/inject"
	"github.com/hutchdev/hutch/internal/egress/policy"
)

// reqConn is what the request handler knows about the connection a request arrived on.
type reqConn struct {
	c *conn
	// sni is the canonical SNI of an intercepted TLS connection; "" for plain HTTP (port 80).
	sni string
}

func (rc reqConn) tls() bool { return rc.sni != "" }

// scheme is the scheme the sandbox used: "https" on intercepted TLS, else "http".
func (rc reqConn) scheme() string {
	if rc.tls() {
		return "https"
	}
	return "http"
}

// mode is the audit mode of requests on the connection.
func (rc reqConn) mode() string {
	if rc.tls() {
		return "intercept"
	}
	return "http"
}

// admit runs the checks every proxied request passes before any policy decision (EGRESS.md
// §2.3 steps 1–2) and returns the request's canonical host. CONNECT answers 405; an
// absolute-form target (HTTP/1.1 "GET http://host/ ...") must use the connection's scheme,
// name a host (not an IP address) and no other port than the connection's, else 400 (the
// server has already replaced Host by the target's authority, so this is what can be
// checked); on intercepted TLS the host must equal the SNI, else 421 (no domain fronting, no
// h2 connection coalescing); on plain HTTP an invalid or IP Host answers 403. ok is false when
// the answer has been written.
func (p *Proxy) admit(w http.ResponseWriter, r *http.Request, rc reqConn, log *slog.Logger) (host string, ok bool) {
	if r.Method == http.MethodConnect {
		writeError(w, errdefs.New(errdefs.CodeMethodNotAllowed, "CONNECT is not supported: connect directly, traffic is proxied transparently"))
		return "", false
	}
	if r.URL.Host != "" && !strings.HasPrefix(r.RequestURI, "/") {
		if err := checkAbsoluteTarget(r.URL, rc); err != nil {
			log.Info("egress: absolute-form request target refused", "target", inject.MaskPlaceholders(r.RequestURI))
			writeError(w, err)
			return "", false
		}
	}
	host, err := policy.CanonicalHost(r.Host)
	if rc.tls() && (err != nil || host != rc.sni) {
		log.Info("egress intercept: host differs from SNI", "host", inject.MaskPlaceholders(r.Host))
		writeError(w, errdefs.Newf(errdefs.CodeEgressMisdirected, "request for %q on a TLS connection to %q: open a connection to that host", r.Host, rc.sni))
		return "", false
	}
	if err != nil {
		p.deny(w, log, err)
		return "", false
	}
	return host, true
}

// checkAbsoluteTarget checks an absolute-form request target against the connection.
func checkAbsoluteTarget(u *url.URL, rc reqConn) error {
	if !strings.EqualFold(u.Scheme, rc.scheme()) {
		return errdefs.Newf(errdefs.CodeInvalidArgument, "absolute request target with scheme %q on a %s connection", u.Scheme, rc.scheme())
	}
	if _, err := policy.CanonicalHost(u.Host); err != nil {
		return errdefs.New(errdefs.CodeInvalidArgument, "absolute request target must name a host: this is not an explicit proxy")
	}
	if port := u.Port(); port != "" && port != strconv.Itoa(int(rc.c.orig.Port())) {
		return errdefs.Newf(errdefs.CodeInvalidArgument, "absolute request target names port %s on a connection to port %d", port, rc.c.orig.Port())
	}
	return nil
}

// handle serves one admitted request to host whose connection-level decision allowed it: plain
// HTTP and intercepted TLS alike (EGRESS.md §2.3 steps 3–7). It re-evaluates the policy for
// this request (a deny rule or a host no longer allowed answers 403 EGRESS_DENIED), drops
// inbound Hutch-* and Proxy-* headers, forwards to the operator handler of a "handler" rule,
// swaps placeholders where bound and refuses them elsewhere (403
// EGRESS_PLACEHOLDER_VIOLATION + a violation event), applies an "inject" rule, and proxies to
// the upstream: the rule's operator upstream when it names one, else host on the connection's
// port. The upstream leg is TLS for intercepted connections, and also for plain-HTTP requests
// that carry a secret (injected or swapped in) or go to an operator upstream: those are
// upgraded to https on port 443, so a secret never travels in clear text. Responses stream
// back with Alt-Svc removed and every value the sandbox's policy can inject or swap redacted
// (headers, trailers, body, an upgraded stream), whether or not this request carried it: an
// upstream may store a credential and hand it back on another path or host. One audit event
// of kind http per request.
func (p *Proxy) handle(w http.ResponseWriter, r *http.Request, rc reqConn, host string, log *slog.Logger) {
	c := rc.c
	c.setRequest(host, r.Method, r.URL.Path)
	// What is audited never holds a placeholder (EGRESS.md §7).
	auditHost, auditPath := inject.MaskPlaceholders(host), inject.MaskPlaceholders(r.URL.Path)
	pol := policy.SnapshotFor(p.cfg.Policy, c.sandboxID)
	rd := pol.Request(host, r.Method, r.URL.Path)
	ev := audit.Event{Kind: audit.KindHTTP, Mode: rc.mode(), Host: auditHost, Port: int(c.orig.Port()), OrigDst: c.orig.String(),
		Proto: r.Proto, Method: inject.MaskPlaceholders(r.Method), Path: auditPath}
	if r.URL.RawQuery != "" {
		ev.Query = "redacted"
	}
	if rd.Rule != nil {
		ev.Rule = rd.Rule.ID
	}
	if rd.Action != policy.Allow {
		ev.Decision, ev.Reason, ev.Status = "deny", rd.Reason, http.StatusForbidden
		p.cfg.Audit(c.sandboxID, ev)
		p.deny(w, log, errdefs.Newf(errdefs.CodeEgressDenied, "egress to %s denied by policy: %s", ev.Host, rd.Reason))
		return
	}
	out := r.Clone(r.Context())
	stripInbound(out.Header)
	if rd.Rule != nil && rd.Rule.Action == policy.ActionHandler {
		p.toHandler(w, out, rc, host, rd.Rule, ev)
		return
	}
	var redact []inject.Pair
	// Placeholders first: swapped where bound, refused anywhere else.
	set := p.placeholderSet(r.Context(), c.sandboxID, pol)
	if !set.Empty() {
		res, err := set.Apply(r.Context(), host, out, p.icpt.cfg.Secret)
		for _, v := range res.Violations {
			p.cfg.Audit(c.sandboxID, audit.Event{Kind: audit.KindViolation, Mode: rc.mode(), Decision: v.Action, Host: ev.Host, Port: ev.Port,
				Method: ev.Method, Path: ev.Path, Secrets: []string{v.Secret}, Location: v.Location, Rule: ev.Rule})
		}
		if res.Stop && p.icpt.cfg.OnStop != nil {
			go p.icpt.cfg.OnStop(c.sandboxID)
		}
		if err != nil {
			log.Info("egress placeholder refused", "host", ev.Host, "err", inject.MaskPlaceholders(err.Error()))
			ev.Decision, ev.Status = "blocked", http.StatusForbidden
			p.cfg.Audit(c.sandboxID, ev)
			if errors.Is(err, inject.ErrViolation) {
				w.Header().Set(DeniedHeader, "1")
				writeError(w, errdefs.Newf(errdefs.CodeEgressPlaceholderViolation, "a placeholder was sent where its secret may not go (%s)", ev.Host))
			} else {
				writeError(w, errdefs.Wrap(errdefs.CodeEgressUpstream, err, "placeholder could not be resolved"))
			}
			return
		}
		redact = append(redact, res.Redact...)
		ev.Secrets = res.Swapped
	}
	if rd.Rule != nil && rd.Rule.Action == policy.ActionInject && rd.Rule.Inject != nil {
		pairs, injected, err := p.applyInject(r.Context(), out.Header, rd.Rule.Inject)
		if err != nil {
			log.Warn("egress inject failed", "rule", rd.Rule.ID, "err", err)
			ev.Decision, ev.Status = "error", http.StatusBadGateway
			p.cfg.Audit(c.sandboxID, ev)
			writeError(w, errdefs.Wrap(errdefs.CodeEgressUpstream, err, "credential for rule "+strconv.Quote(rd.Rule.ID)+" is not available"))
			return
		}
		redact = append(redact, pairs...)
		ev.Injected = injected
	}
	// The upstream leg: an operator route, or host itself; TLS whenever a secret rides along.
	routed := ""
	if rd.Rule != nil && rd.Rule.Upstream != "" {
		if _, ok := p.cfg.Upstreams[rd.Rule.Upstream]; !ok || p.icpt == nil {
			ev.Decision, ev.Status = "deny", http.StatusBadGateway
			p.cfg.Audit(c.sandboxID, ev)
			writeError(w, errdefs.Newf(errdefs.CodeEgressUpstream, "upstream %q is not configured on this hutchd", rd.Rule.Upstream))
			return
		}
		routed = rd.Rule.Upstream
		ev.Upstream = routed
	}
	scheme, port, upHost := rc.scheme(), int(c.orig.Port()), r.Host
	if !rc.tls() && (len(redact) > 0 || routed != "") {
		scheme, port, upHost = "https", 443, host
		ev.Reason = "upstream upgraded to https: the request carries a secret"
		if len(redact) == 0 {
			ev.Reason = "upstream upgraded to https: operator upstream"
		}
	}
	p.forward(w, out, rc, upstreamLeg{scheme: scheme, target: net.JoinHostPort(host, strconv.Itoa(port)), host: upHost, routed: routed},
		p.sandboxRedactor(r.Context(), c.sandboxID, pol, set, redact), ev, log)
}

// upstreamLeg is where handle sends a request.
type upstreamLeg struct {
	scheme string // "http" or "https"
	target string // host:port put in the URL (dialled by name, or the route's address)
	host   string // Host header upstream
	routed string // operator upstream name, "" for none
}

// forward proxies out to leg, redacting the response with red (nil: no redaction), and emits
// ev when done.
func (p *Proxy) forward(w http.ResponseWriter, out *http.Request, rc reqConn, leg upstreamLeg, red *inject.Redactor, ev audit.Event, log *slog.Logger) {
	c := rc.c
	var tr http.RoundTripper
	if leg.scheme == "https" {
		tr = p.icTransport(c.sandboxID, leg.routed)
	} else {
		tr = p.transport(c.sandboxID)
	}
	if red != nil {
		// Let the upstream transport negotiate (and undo) compression, so the redactor sees
		// plain bytes; the same for a WebSocket upgrade (permessage-deflate would compress
		// the upgraded stream).
		out.Header.Del("Accept-Encoding")
		out.Header.Del("Sec-WebSocket-Extensions")
	}
	ev.Decision = "allow"
	start := time.Now()
	var rr *inject.RedactReader
	// Header fields redacted or dropped: final header and trailers here, 1xx blocks on the
	// transport's goroutine.
	var inHeaders atomic.Int64
	defer func() {
		ev.DurMs = time.Since(start).Milliseconds()
		ev.Redaction = int(inHeaders.Load())
		if rr != nil {
			ev.Redaction += rr.Count()
		}
		p.cfg.Audit(c.sandboxID, ev)
	}()
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = leg.scheme
			pr.Out.URL.Host = leg.target
			pr.Out.Host = leg.host
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ModifyResponse: func(resp *http.Response) error {
			ev.Status = resp.StatusCode
			resp.Header.Del("Alt-Svc")
			if red != nil {
				// The final header, and the names of declared trailers (the ReverseProxy
				// announces them in a Trailer field before the body).
				inHeaders.Add(int64(red.Header(resp.Header) + red.Header(resp.Trailer)))
				if resp.StatusCode == http.StatusSwitchingProtocols {
					return redactUpgrade(resp, red, &inHeaders)
				}
				// The redactor sees plain bytes or nothing is sent (fail closed).
				if err := decodeForRedaction(resp, out.Method); err != nil {
					return err
				}
				rr = red.Reader(resp.Body)
				// Trailer values arrive with the end of the body: redact them then, before
				// the ReverseProxy copies them to the sandbox.
				resp.Body = &eofHook{ReadCloser: rr, atEOF: func() { inHeaders.Add(int64(red.Header(resp.Trailer))) }, onErr: func(err error) {
					if errdefs.IsCode(err, errdefs.CodeEgressUnredactable) {
						ev.Decision, ev.Reason = "blocked", "response cut off: "+err.Error()
					}
				}}
				resp.ContentLength = -1
				resp.Header.Del("Content-Length")
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if errdefs.IsCode(err, errdefs.CodeEgressDenied) {
				ev.Decision, ev.Status = "deny", http.StatusForbidden
				p.deny(w, log, err)
				return
			}
			log.Debug("egress upstream failed", "err", err)
			ev.Status = http.StatusBadGateway
			if errdefs.IsCode(err, errdefs.CodeEgressUnredactable) {
				ev.Decision, ev.Reason = "blocked", err.Error()
				writeError(w, err)
				return
			}
			if errors.Is(err, inject.ErrViolation) {
				ev.Decision, ev.Status = "blocked", http.StatusForbidden
				w.Header().Set(DeniedHeader, "1")
				writeError(w, errdefs.New(errdefs.CodeEgressPlaceholderViolation, "a placeholder was sent in a streamed request body"))
				return
			}
			ev.Reason = "upstream unreachable"
			writeError(w, &errdefs.Error{Code: errdefs.CodeEgressUpstream, Message: "upstream " + leg.target + " unreachable", Err: err})
		},
	}
	log.Debug("egress request", "method", out.Method, "host", ev.Host, "scheme", leg.scheme, "rule", ev.Rule, "injected", ev.Injected)
	rp.ServeHTTP(&infoFilter{ResponseWriter: w, red: red, count: &inHeaders}, out)
}

// infoFilter filters the informational (1xx) header blocks the ReverseProxy forwards: it
// writes them from its transport trace hook (Got1xxResponse) as they arrive, before and
// outside ModifyResponse, so they get here what ModifyResponse does to the final header:
// Alt-Svc removed and, with a redactor, red.Header (values redacted, fields whose name holds
// a secret dropped). 101 is a final response and passes (ModifyResponse saw it). Every other
// method is the wrapped writer's; Unwrap lets http.ResponseController reach its Flush and
// Hijack.
type infoFilter struct {
	http.ResponseWriter
	red   *inject.Redactor
	count *atomic.Int64
}

func (f *infoFilter) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		h := f.ResponseWriter.Header()
		h.Del("Alt-Svc")
		f.count.Add(int64(f.red.Header(h)))
	}
	f.ResponseWriter.WriteHeader(code)
}

func (f *infoFilter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// eofHook calls atEOF once, when the body it wraps has been read to its end, and onErr (when
// set) once, with the first other read error.
type eofHook struct {
	io.ReadCloser
	atEOF func()
	onErr func(error)
	done  bool
}

func (e *eofHook) Read(p []byte) (int, error) {
	n, err := e.ReadCloser.Read(p)
	if err != nil && !e.done {
		e.done = true
		if errors.Is(err, io.EOF) {
			e.atEOF()
		} else if e.onErr != nil {
			e.onErr(err)
		}
	}
	return n, err
}
