package proxy

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/handler"
	"github.com/hutchdev/hutch/internal/egress/inject"
	"github.com/hutchdev/hutch/internal/egress/policy"
)

// serveIntercepted handles one request on an intercepted TLS connection (EGRESS.md §2.3):
// Host must equal the SNI (421 otherwise: no domain fronting, no h2 coalescing), CONNECT is
// refused (405), an absolute-form target naming another host is refused (400), inbound
// Hutch-* and Proxy-* headers are dropped, the policy decides per request, a matching inject
// rule sets its headers from secrets, and the response streams back with Alt-Svc removed and
// injected values redacted.
func (p *Proxy) serveIntercepted(w http.ResponseWriter, r *http.Request) {
	m, ok := r.Context().Value(icKey{}).(*icMeta)
	if !ok {
		writeError(w, errdefs.New(errdefs.CodeInternal, "intercepted connection without identity"))
		return
	}
	c := m.c
	log := p.log.With("sandbox_id", c.sandboxID, "sni", m.sni, "proto", r.Proto)
	if r.Method == http.MethodConnect {
		writeError(w, errdefs.New(errdefs.CodeMethodNotAllowed, "CONNECT is not supported: connect directly, traffic is proxied transparently"))
		return
	}
	host, err := policy.CanonicalHost(r.Host)
	if err != nil || host != m.sni {
		log.Info("egress intercept: host differs from SNI", "host", r.Host)
		writeError(w, errdefs.Newf(errdefs.CodeEgressMisdirected, "request for %q on a TLS connection to %q: open a connection to that host", r.Host, m.sni))
		return
	}
	if r.URL.Host != "" {
		if uh, err := policy.CanonicalHost(r.URL.Host); err != nil || uh != host {
			writeError(w, errdefs.New(errdefs.CodeInvalidArgument, "absolute request target names another host than Host"))
			return
		}
	}
	c.setRequest(host, r.Method, r.URL.Path)
	pol := policy.SnapshotFor(p.cfg.Policy, c.sandboxID)
	rd := pol.Request(host, r.Method, r.URL.Path)
	if rd.Action != policy.Allow {
		p.deny(w, log, errdefs.Newf(errdefs.CodeEgressDenied, "egress to %s denied by policy: %s", host, rd.Reason))
		return
	}
	out := r.Clone(r.Context())
	stripInbound(out.Header)
	ev := audit.Event{Kind: audit.KindHTTP, Mode: "intercept", Host: host, Port: int(c.orig.Port()), OrigDst: c.orig.String(),
		Proto: r.Proto, Method: r.Method, Path: r.URL.Path}
	if r.URL.RawQuery != "" {
		ev.Query = "redacted"
	}
	if rd.Rule != nil {
		ev.Rule = rd.Rule.ID
	}
	if rd.Rule != nil && rd.Rule.Action == policy.ActionHandler {
		p.toHandler(w, out, c, host, rd.Rule, ev)
		return
	}
	var redact []inject.Pair
	var injected []string
	// Placeholders first: swapped where bound, refused anywhere else.
	if set := p.placeholderSet(r.Context(), c.sandboxID, pol); !set.Empty() {
		res, err := set.Apply(r.Context(), host, out, p.icpt.cfg.Secret)
		for _, v := range res.Violations {
			p.cfg.Audit(c.sandboxID, audit.Event{Kind: audit.KindViolation, Decision: v.Action, Host: host, Port: ev.Port,
				Method: r.Method, Path: r.URL.Path, Secrets: []string{v.Secret}, Location: v.Location, Rule: ev.Rule})
		}
		if res.Stop && p.icpt.cfg.OnStop != nil {
			go p.icpt.cfg.OnStop(c.sandboxID)
		}
		if err != nil {
			log.Info("egress placeholder refused", "host", host, "err", err)
			ev.Decision, ev.Status = "blocked", http.StatusForbidden
			p.cfg.Audit(c.sandboxID, ev)
			w.Header().Set(DeniedHeader, "1")
			if errors.Is(err, inject.ErrViolation) {
				writeError(w, errdefs.Newf(errdefs.CodeEgressPlaceholderViolation, "a placeholder was sent where its secret may not go (%s)", host))
			} else {
				writeError(w, errdefs.Wrap(errdefs.CodeEgressUpstream, err, "placeholder could not be resolved"))
			}
			return
		}
		redact = append(redact, res.Redact...)
		ev.Secrets = res.Swapped
	}
	if rd.Rule != nil && rd.Rule.Action == policy.ActionInject && rd.Rule.Inject != nil {
		var pairs []inject.Pair
		pairs, injected, err = p.applyInject(r.Context(), out.Header, rd.Rule.Inject)
		redact = append(redact, pairs...)
		if err != nil {
			log.Warn("egress inject failed", "rule", rd.Rule.ID, "err", err)
			writeError(w, errdefs.Wrap(errdefs.CodeEgressUpstream, err, "credential for rule "+strconv.Quote(rd.Rule.ID)+" is not available"))
			return
		}
	}
	red := inject.NewRedactor(redact)
	if red != nil {
		// Let the upstream transport negotiate (and undo) compression, so the redactor sees
		// plain bytes.
		out.Header.Del("Accept-Encoding")
	}
	port := int(c.orig.Port())
	target := net.JoinHostPort(host, strconv.Itoa(port))
	// An upstream route: the request goes to the operator's upstream address (TLS, verified
	// for host), never to the public address of host.
	routed := ""
	if rd.Rule != nil && rd.Rule.Upstream != "" {
		if _, ok := p.cfg.Upstreams[rd.Rule.Upstream]; !ok {
			ev.Decision, ev.Status = "deny", http.StatusBadGateway
			p.cfg.Audit(c.sandboxID, ev)
			writeError(w, errdefs.Newf(errdefs.CodeEgressUpstream, "upstream %q is not configured on this hutchd", rd.Rule.Upstream))
			return
		}
		routed = rd.Rule.Upstream
		ev.Upstream = routed
	}
	ruleID := ""
	if rd.Rule != nil {
		ruleID = rd.Rule.ID
	}
	ev.Injected = injected
	ev.Decision = "allow"
	start := time.Now()
	var rr *inject.RedactReader
	defer func() {
		ev.DurMs = time.Since(start).Milliseconds()
		if rr != nil {
			ev.Redaction = rr.Count()
		}
		p.cfg.Audit(c.sandboxID, ev)
	}()
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "https"
			pr.Out.URL.Host = target
			pr.Out.Host = r.Host
		},
		Transport:     p.icTransport(c.sandboxID, routed),
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			ev.Status = resp.StatusCode
			resp.Header.Del("Alt-Svc")
			if red != nil {
				redactHeader(red, resp.Header)
				redactHeader(red, resp.Trailer)
				if resp.StatusCode != http.StatusSwitchingProtocols {
					rr = red.Reader(resp.Body)
					resp.Body = rr
					resp.ContentLength = -1
					resp.Header.Del("Content-Length")
				}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if errdefs.IsCode(err, errdefs.CodeEgressDenied) {
				p.deny(w, log, err)
				return
			}
			log.Debug("egress upstream failed", "err", err)
			ev.Status = http.StatusBadGateway
			if errors.Is(err, inject.ErrViolation) {
				ev.Decision = "blocked"
				w.Header().Set(DeniedHeader, "1")
				writeError(w, errdefs.New(errdefs.CodeEgressPlaceholderViolation, "a placeholder was sent in a streamed request body"))
				return
			}
			writeError(w, &errdefs.Error{Code: errdefs.CodeEgressUpstream, Message: "upstream " + target + " unreachable", Err: err})
		},
	}
	log.Debug("egress intercepted request", "method", r.Method, "host", host, "rule", ruleID, "injected", injected)
	rp.ServeHTTP(w, out)
}

// stripInbound removes headers a sandbox must not send upstream: Hutch-* (the proxy's own
// protocol) and Proxy-*.
func stripInbound(h http.Header) {
	for k := range h {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "hutch-") || strings.HasPrefix(lk, "proxy-") {
			delete(h, k)
		}
	}
}

// applyInject applies an inject rule to h: removals first, then set headers (replacing what
// the sandbox sent), then Basic auth. It returns the redaction pairs for what it injected and
// the names of the headers it set (never values).
func (p *Proxy) applyInject(ctx context.Context, h http.Header, in *policy.Inject) ([]inject.Pair, []string, error) {
	if p.icpt == nil || p.icpt.cfg.Secret == nil {
		return nil, nil, errNoIntercept
	}
	var pairs []inject.Pair
	used := map[string]bool{}
	secret := func(name string) (string, error) {
		v, err := p.icpt.cfg.Secret(ctx, name)
		if err != nil {
			return "", err
		}
		if !used[name] {
			used[name] = true
			pairs = append(pairs, inject.Forms(v, []byte("[redacted:"+name+"]"))...)
		}
		return string(v), nil
	}
	var names []string
	for _, k := range in.RemoveHeaders {
		h.Del(k)
	}
	for k, tmpl := range in.SetHeaders {
		v, err := policy.Expand(tmpl, secret)
		if err != nil {
			return nil, nil, err
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, nil, fmt.Errorf("header %s: value has control characters", k)
		}
		h.Set(k, v)
		names = append(names, textproto.CanonicalMIMEHeaderKey(k))
	}
	if ba := in.BasicAuth; ba != nil {
		u, err := policy.Expand(ba.Username, secret)
		if err != nil {
			return nil, nil, err
		}
		pw, err := policy.Expand(ba.Password, secret)
		if err != nil {
			return nil, nil, err
		}
		cred := u + ":" + pw
		pairs = append(pairs, inject.Forms([]byte(cred), []byte("[redacted:basic-auth]"))...)
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred)))
		names = append(names, "Authorization")
	}
	return pairs, names, nil
}

// redactHeader redacts every value of h in place.
func redactHeader(r *inject.Redactor, h http.Header) {
	for k, vs := range h {
		for i, v := range vs {
			if nv, n := r.String(v); n > 0 {
				h[k][i] = nv
			}
		}
	}
}

// placeholderSet returns the sandbox's placeholders under pol (nil when none).
func (p *Proxy) placeholderSet(ctx context.Context, sandboxID string, pol *policy.Compiled) *inject.Set {
	if pol == nil || p.icpt.cfg.Placeholders == nil {
		return nil
	}
	spec := pol.Spec()
	if len(spec.Placeholders) == 0 {
		return nil
	}
	tokens, err := p.icpt.cfg.Placeholders(ctx, sandboxID)
	if err != nil {
		p.log.Warn("egress placeholders unavailable", "sandbox_id", sandboxID, "err", err)
		return nil
	}
	return inject.NewSet(spec.Placeholders, tokens)
}

// toHandler forwards an intercepted request to the operator handler rule names (signed; the
// handler holds its own credentials, so placeholders are not swapped).
func (p *Proxy) toHandler(w http.ResponseWriter, r *http.Request, c *conn, host string, rule *policy.Rule, ev audit.Event) {
	ev.Handler = rule.Handler
	start := time.Now()
	defer func() {
		ev.DurMs = time.Since(start).Milliseconds()
		p.cfg.Audit(c.sandboxID, ev)
	}()
	h := p.icpt.cfg.Handlers[rule.Handler]
	if h == nil {
		ev.Decision, ev.Status = "deny", http.StatusBadGateway
		writeError(w, errdefs.Newf(errdefs.CodeEgressHandlerUnavailable, "handler %q is not configured on this hutchd", rule.Handler))
		return
	}
	key, err := p.icpt.cfg.Secret(r.Context(), h.SigningSecret())
	if err != nil {
		ev.Decision, ev.Status = "deny", http.StatusBadGateway
		writeError(w, errdefs.Wrap(errdefs.CodeEgressHandlerUnavailable, err, "signing key of handler "+strconv.Quote(rule.Handler)+" is not available"))
		return
	}
	ev.Decision = "allow"
	ev.Status = h.Forward(w, r, handler.Origin{Sandbox: c.sandboxID, Scheme: "https", Host: host, Port: int(c.orig.Port())}, key, writeError)
}
