package proxy

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/inject"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/egress/webhook"
)

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
		// The username is public: the credential is redacted whole; its secrets' own forms
		// (added by secret above) also catch partial reflections.
		pairs = append(pairs, inject.WholeForms([]byte(cred), []byte("[redacted:basic-auth]"))...)
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred)))
		names = append(names, "Authorization")
	}
	return pairs, names, nil
}

// placeholderSet returns the sandbox's placeholders under pol (nil when none).
func (p *Proxy) placeholderSet(ctx context.Context, sandboxID string, pol *policy.Compiled) *inject.Set {
	if pol == nil || p.icpt == nil || p.icpt.cfg.Placeholders == nil {
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

// toHandler forwards a request to the operator handler rule names (signed; the handler holds
// its own credentials, so placeholders are not swapped). The handler learns the scheme the
// sandbox used (Hutch-Forwarded-Scheme).
func (p *Proxy) toHandler(w http.ResponseWriter, r *http.Request, rc reqConn, host string, rule *policy.Rule, ev audit.Event) {
	c := rc.c
	ev.Handler = rule.Handler
	start := time.Now()
	defer func() {
		ev.DurMs = time.Since(start).Milliseconds()
		p.cfg.Audit(c.sandboxID, ev)
	}()
	var h *webhook.Handler
	if p.icpt != nil {
		h = p.icpt.cfg.Handlers[rule.Handler]
	}
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
	ev.Status = h.Forward(w, r, webhook.Origin{Sandbox: c.sandboxID, Scheme: rc.scheme(), Host: host, Port: int(c.orig.Port())}, key, writeError)
}
