// Package policy is the per-sandbox egress decision hook: given a sandbox and a destination
// name, it says whether traffic may go there.
//
// Where it sits: hutchd's DNS server asks before resolving a name (Kind DNS), and the proxy
// asks for every HTTP request (Kind HTTP) and every TLS connection (Kind TLS) after it has
// learned the name from the Host header or the SNI. Policies see canonical names only (see
// CanonicalHost); raw-IP destinations never reach a Policy, they are refused before.
//
// What a Policy cannot do: open the address floor (internal/egress/floor). Whatever a Policy
// allows is still dialled by name through a guard that refuses loopback, private, link-local
// and host addresses; only operator upstreams (egress.Config.Upstreams) are exempt.
//
// Per-sandbox policies: a Spec (spec.go, the API's JSON) is checked by Validate (stable code
// EGRESS_POLICY_INVALID with a JSON pointer) and compiled (Compile) into an immutable
// *Compiled; a Registry holds one per sandbox behind atomic pointers and implements Policy, so
// a change applies to the next decision. Compiled.Evaluate answers per destination (Deny,
// Allow, or Intercept: TLS must be terminated and each request evaluated), Compiled.Request per
// HTTP request (the matched Rule). Host patterns are label-aware (match.go). Callers treat any
// Action they do not know as Deny, so adding an Action is fail-closed for older callers.
package policy

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/hutchdev/hutch/errdefs"
)

// Kind is the protocol a decision is for.
type Kind int

// Kinds.
const (
	KindDNS  Kind = iota + 1 // a DNS query for Host (Port is 0)
	KindHTTP                 // a plain HTTP request with Host header Host to Port
	KindTLS                  // a TLS connection with SNI Host to Port
	KindTCP                  // a TCP connection to Port (not 80/443) of Host, a name the sandbox resolved (pin table)
)

func (k Kind) String() string {
	switch k {
	case KindDNS:
		return "dns"
	case KindHTTP:
		return "http"
	case KindTLS:
		return "tls"
	case KindTCP:
		return "tcp"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Request describes one destination a sandbox wants to reach.
type Request struct {
	SandboxID string
	Kind      Kind
	Host      string // canonical host name (CanonicalHost), never an IP literal
	Port      int    // destination TCP port; 0 for DNS
	// Upstream is true when Host is an operator-declared upstream (egress.Config.Upstreams).
	Upstream bool
}

// Action is what to do with a request.
type Action int

// Actions. The zero value is Deny, so an empty Decision refuses.
const (
	Deny      Action = iota // refuse: HTTP 403 EGRESS_DENIED, TLS close, DNS NXDOMAIN
	Allow                   // pass through (HTTP reverse-proxied, TLS spliced unread)
	Intercept               // TLS must be terminated (sandbox CA) and every request evaluated (Compiled.Request); for plain HTTP: evaluate every request
)

func (a Action) String() string {
	switch a {
	case Deny:
		return "deny"
	case Allow:
		return "allow"
	case Intercept:
		return "intercept"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Decision is a Policy's answer.
type Decision struct {
	Action Action
	// Reason is a short human explanation, sent to the sandbox in 403 bodies and logged.
	Reason string
	// Rule is the rule behind the decision when one made it (a handler or upstream rule that
	// implicitly allows a host in allowlist mode); nil otherwise. Per-request rules come from
	// Compiled.Request.
	Rule *Rule
}

// Policy decides per sandbox and destination. Implementations must be safe for concurrent use
// and fast (they run on every query, request and connection); they must not block on I/O
// longer than ctx allows.
type Policy interface {
	Decide(ctx context.Context, req Request) Decision
}

// AllowPublic is the default Policy: every name is allowed, which means "any public
// destination", because the address floor still refuses private, loopback, link-local and host
// addresses at dial time. Operator upstreams are allowed too.
type AllowPublic struct{}

// Decide allows every request.
func (AllowPublic) Decide(context.Context, Request) Decision {
	return Decision{Action: Allow, Reason: "default policy: public destinations"}
}

// Func adapts a function to Policy.
type Func func(ctx context.Context, req Request) Decision

// Decide calls f.
func (f Func) Decide(ctx context.Context, req Request) Decision { return f(ctx, req) }

// CanonicalHost returns host lowercased, without a trailing dot and without a ":port" suffix.
// It fails with errdefs.CodeEgressDenied when host is empty, an IP literal (in any bracketed or
// plain form), longer than 253 bytes, or contains anything but [a-z0-9._-] in labels of 1–63
// bytes. Internationalised names must arrive in their ASCII (punycode) form, as clients send
// them on the wire.
func CanonicalHost(host string) (string, error) {
	h := host
	if strings.HasPrefix(h, "[") {
		return "", errdefs.Newf(errdefs.CodeEgressDenied, "egress to IP address %q is not allowed: use a host name", host)
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" {
		return "", errdefs.New(errdefs.CodeEgressDenied, "egress without a host name is not allowed")
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return "", errdefs.Newf(errdefs.CodeEgressDenied, "egress to IP address %q is not allowed: use a host name", h)
	}
	if len(h) > 253 {
		return "", errdefs.Newf(errdefs.CodeEgressDenied, "host name too long (%d bytes)", len(h))
	}
	allDigits := true
	for _, label := range strings.Split(h, ".") {
		if len(label) == 0 || len(label) > 63 {
			return "", errdefs.Newf(errdefs.CodeEgressDenied, "invalid host name %q", host)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c == '-', c == '_':
				allDigits = false
			default:
				return "", errdefs.Newf(errdefs.CodeEgressDenied, "invalid host name %q", host)
			}
		}
	}
	if allDigits {
		// "2852039166" and friends: numeric spellings of addresses some resolvers accept.
		return "", errdefs.Newf(errdefs.CodeEgressDenied, "egress to numeric host %q is not allowed", h)
	}
	return h, nil
}
