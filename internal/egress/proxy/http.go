package proxy

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/floor"
	"github.com/hutchdev/hutch/internal/egress/policy"
)

// DeniedHeader is set on every 403 the proxy itself answers, so clients can tell a proxy
// refusal from an upstream's 403.
const DeniedHeader = "Hutch-Egress-Denied"

// serveRequest proxies one plain-HTTP request from a sandbox.
func (p *Proxy) serveRequest(w http.ResponseWriter, r *http.Request) {
	c, ok := r.Context().Value(connKey{}).(*conn)
	if !ok {
		writeError(w, errdefs.New(errdefs.CodeInternal, "connection without sandbox identity"))
		return
	}
	log := p.log.With("sandbox_id", c.sandboxID, "orig_dst", c.orig.String(), "host", r.Host)
	if r.Method == http.MethodConnect {
		writeError(w, errdefs.New(errdefs.CodeMethodNotAllowed, "CONNECT is not supported: connect directly, traffic is proxied transparently"))
		return
	}
	host, err := policy.CanonicalHost(r.Host)
	if err != nil {
		p.deny(w, log, err)
		return
	}
	_, upstream := p.cfg.Upstreams[host]
	if !upstream && floor.DeniedName(host) {
		p.deny(w, log, errdefs.Newf(errdefs.CodeEgressDenied, "egress to %s is not allowed", host))
		return
	}
	port := int(c.orig.Port())
	d := p.cfg.Policy.Decide(r.Context(), policy.Request{SandboxID: c.sandboxID, Kind: policy.KindHTTP, Host: host, Port: port, Upstream: upstream})
	ev := audit.Event{Kind: audit.KindHTTP, Mode: "http", Host: host, Port: port, OrigDst: c.orig.String(),
		Proto: r.Proto, Method: r.Method, Path: r.URL.Path}
	if r.URL.RawQuery != "" {
		ev.Query = "redacted"
	}
	if d.Action != policy.Allow && d.Action != policy.Intercept {
		ev.Decision, ev.Reason, ev.Status = "deny", d.Reason, http.StatusForbidden
		p.cfg.Audit(c.sandboxID, ev)
		p.deny(w, log, errdefs.Newf(errdefs.CodeEgressDenied, "egress to %s denied by policy: %s", host, d.Reason))
		return
	}
	c.setDest(policy.KindHTTP, host, false, upstream)
	if d.Action == policy.Intercept {
		rd := policy.SnapshotFor(p.cfg.Policy, c.sandboxID).Request(host, r.Method, r.URL.Path)
		if rd.Rule != nil {
			ev.Rule = rd.Rule.ID
		}
		if rd.Action != policy.Allow {
			ev.Decision, ev.Reason, ev.Status = "deny", rd.Reason, http.StatusForbidden
			p.cfg.Audit(c.sandboxID, ev)
			p.deny(w, log, errdefs.Newf(errdefs.CodeEgressDenied, "egress to %s denied by policy: %s", host, rd.Reason))
			return
		}
	}
	c.setRequest(host, r.Method, r.URL.Path)
	ev.Decision = "allow"
	start := time.Now()
	defer func() {
		ev.DurMs = time.Since(start).Milliseconds()
		p.cfg.Audit(c.sandboxID, ev)
	}()
	target := net.JoinHostPort(host, strconv.Itoa(port))
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = target
			pr.Out.Host = pr.In.Host
		},
		Transport:     p.transport(c.sandboxID),
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			ev.Status = resp.StatusCode
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if errdefs.IsCode(err, errdefs.CodeEgressDenied) {
				p.deny(w, log, err)
				return
			}
			ev.Status, ev.Reason = http.StatusBadGateway, "upstream unreachable"
			log.Debug("egress upstream failed", "err", err)
			writeError(w, &errdefs.Error{Code: errdefs.CodeEgressUpstream, Message: "upstream " + target + " unreachable", Err: err})
		},
	}
	log.Debug("egress http", "method", r.Method)
	rp.ServeHTTP(w, r)
}

// deny answers 403 EGRESS_DENIED for err.
func (p *Proxy) deny(w http.ResponseWriter, log *slog.Logger, err error) {
	log.Debug("egress denied", "err", err)
	// Answer with the refusal itself, not the dialer's wrapping (which names host internals).
	var e *errdefs.Error
	if !errors.As(err, &e) || e.Code != errdefs.CodeEgressDenied {
		e = &errdefs.Error{Code: errdefs.CodeEgressDenied, Message: "egress denied", Err: err}
	}
	w.Header().Set(DeniedHeader, "1")
	writeError(w, e)
}

// writeError writes err as a JSON errdefs envelope with its code's status.
func writeError(w http.ResponseWriter, err error) {
	env := errdefs.ToEnvelope(err, "egress.proxy")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(env.HTTPStatus)
	json.NewEncoder(w).Encode(env)
}
