package proxy

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/blocked"
	"github.com/hutchdev/hutch/internal/egress/inject"
	"github.com/hutchdev/hutch/internal/egress/policy"
)

// DeniedHeader is set on every 403 the proxy itself answers, so clients can tell a proxy
// refusal from an upstream's 403.
const DeniedHeader = "Hutch-Egress-Denied"

// serveRequest serves one plain-HTTP request from a sandbox (port 80): the connection-level
// checks (Host, name floor, the policy's decision for the host on this port), then the
// request handler shared with intercepted TLS (request.go: per-request rules, placeholders,
// handlers, upstream routes, https upgrade of secret-bearing requests).
func (p *Proxy) serveRequest(w http.ResponseWriter, r *http.Request) {
	c, ok := r.Context().Value(connKey{}).(*conn)
	if !ok {
		writeError(w, errdefs.New(errdefs.CodeInternal, "connection without sandbox identity"))
		return
	}
	log := p.log.With("sandbox_id", c.sandboxID, "orig_dst", c.orig.String(), "host", r.Host)
	rc := reqConn{c: c}
	host, ok := p.admit(w, r, rc, log)
	if !ok {
		return
	}
	_, upstream := p.cfg.Upstreams[host]
	if !upstream && blocked.DeniedName(host) {
		p.deny(w, log, errdefs.Newf(errdefs.CodeEgressDenied, "egress to %s is not allowed", host))
		return
	}
	port := int(c.orig.Port())
	d := p.cfg.Policy.Decide(r.Context(), policy.Request{SandboxID: c.sandboxID, Kind: policy.KindHTTP, Host: host, Port: port, Upstream: upstream})
	if d.Action != policy.Allow && d.Action != policy.Intercept {
		ev := audit.Event{Kind: audit.KindHTTP, Mode: rc.mode(), Host: host, Port: port, OrigDst: c.orig.String(),
			Proto: r.Proto, Method: r.Method, Path: inject.MaskPlaceholders(r.URL.Path), Decision: "deny", Reason: d.Reason, Status: http.StatusForbidden}
		if r.URL.RawQuery != "" {
			ev.Query = "redacted"
		}
		p.cfg.Audit(c.sandboxID, ev)
		p.deny(w, log, errdefs.Newf(errdefs.CodeEgressDenied, "egress to %s denied by policy: %s", host, d.Reason))
		return
	}
	c.setDest(policy.KindHTTP, host, false, upstream)
	p.handle(w, r, rc, host, log)
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
	_ = json.NewEncoder(w).Encode(env) // the client is told by the status; a lost body has no one to tell
}
