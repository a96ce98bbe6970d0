package v1

import (
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// Egress policy modes (EgressPolicy.Mode).
const (
	EgressAllowAll  = "allow-all"
	EgressAllowlist = "allowlist"
	EgressDenyAll   = "deny-all"
)

// EgressPolicy is a sandbox's egress policy: the body and reply of GET/PUT/PATCH
// /v1/sandboxes/{id}/egress (PATCH takes an RFC 7386 merge patch: null removes a field,
// arrays are replaced whole) and CreateSandboxRequest.Egress. The zero policy is
// {"mode":"allow-all"}: every public destination on ports 80 and 443, nothing intercepted.
// PUT and PATCH apply at once: open connections the new policy no longer allows are closed.
//
// Evaluation: the address floor (private, loopback, link-local, metadata and host addresses
// are never reachable); Deny; Mode (allowlist needs an Allow match, or a rule of action
// handler or with an upstream for the host); then the host's rules, most specific host
// pattern first (exact, then longest *.suffix, then *), then list order; the first rule whose
// Match matches wins; no rule: pass. Host patterns are an exact lower-case name, "*.suffix"
// (one or more whole leftmost labels: "*.github.com" does not match "github.com") or "*"; IP
// literals are refused. Denied names get NXDOMAIN with Extended DNS Error 15 and are never
// resolved upstream.
//
// The reference system's options map onto it: allowedHosts → Allow (and Mode allowlist),
// deniedHosts → Deny, enableInternet:false → allowlist (or deny-all with no Allow),
// interceptHttps → implied by Rules, outboundByHost → Rules with action handler.
//
// Invalid policies (unknown fields included) fail with 400 EGRESS_POLICY_INVALID whose
// context "pointer" is the JSON pointer of the bad field ("/rules/0/hosts/1").
type EgressPolicy struct {
	// Mode is EgressAllowAll (default), EgressAllowlist or EgressDenyAll.
	Mode string `json:"mode,omitempty"`
	// Allow and Deny are host patterns (at most 1000 each); Deny wins.
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// Ports are the TCP ports allowed besides 80 and 443 (1–65535, at most 100).
	Ports []int `json:"ports,omitempty"`
	// Inspect is "rules" (default: TLS is terminated only for hosts with rules or
	// placeholders), "all" (every allowed TLS host) or "none" (never; rules are then refused).
	Inspect string `json:"inspect,omitempty"`
	// DNS says how denied names are answered.
	DNS EgressDNS `json:"dns,omitempty"`
	// Rules act on requests to their hosts (at most 200).
	Rules []EgressRule `json:"rules,omitempty"`
	// Placeholders bind secrets to env vars (at most 100).
	Placeholders []EgressPlaceholder `json:"placeholders,omitempty"`
}

// EgressDNS configures DNS answers for denied names: Denied is "nxdomain" (the default).
type EgressDNS struct {
	Denied string `json:"denied,omitempty"`
}

// Egress rule actions (EgressRule.Action).
const (
	EgressInjectAction  = "inject"
	EgressDenyAction    = "deny"
	EgressHandlerAction = "handler"
	EgressPassAction    = "pass"
)

// EgressRule is one per-host rule.
type EgressRule struct {
	// ID names the rule in audit events: unique in the policy, [a-z0-9_-]{1,64}.
	ID string `json:"id"`
	// Hosts are host patterns as in EgressPolicy.Allow (at least one).
	Hosts []string `json:"hosts"`
	// Match narrows the rule to some requests; nil matches all.
	Match *EgressMatch `json:"match,omitempty"`
	// Action is one of the Egress…Action constants.
	Action string `json:"action"`
	// Inject says which headers to set or remove (action inject).
	Inject *EgressInject `json:"inject,omitempty"`
	// Handler names an operator handler from hutchd's configuration (action handler).
	Handler string `json:"handler,omitempty"`
	// Upstream names an operator upstream from hutchd's configuration: the request goes there
	// instead of the host's public address (actions inject and pass).
	Upstream string `json:"upstream,omitempty"`
}

// EgressMatch selects requests by method (upper-case; empty: any) and path.
type EgressMatch struct {
	Methods []string         `json:"methods,omitempty"`
	Path    *EgressPathMatch `json:"path,omitempty"`
}

// EgressPathMatch matches the decoded request path (without the query, "." and ".."
// segments and duplicate slashes resolved): exactly one of Exact and Prefix.
type EgressPathMatch struct {
	Exact  string `json:"exact,omitempty"`
	Prefix string `json:"prefix,omitempty"`
}

// EgressInject sets or removes request headers. Values are templates: "${secrets.NAME}" is
// replaced by the secret's value at request time (NAME must exist when the policy is set).
// Injected headers replace what the sandbox sent.
type EgressInject struct {
	SetHeaders    map[string]string `json:"setHeaders,omitempty"`
	RemoveHeaders []string          `json:"removeHeaders,omitempty"`
	BasicAuth     *EgressBasicAuth  `json:"basicAuth,omitempty"`
}

// EgressBasicAuth sets Authorization: Basic base64(username ":" password); both are
// templates.
type EgressBasicAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// EgressPlaceholder binds a secret to an env var of the sandbox whose value is a placeholder:
// the proxy swaps it for the real value only in requests to Hosts (each must be allowed by the
// policy).
type EgressPlaceholder struct {
	// Secret is the secret's name (it must exist); Env the env var (default: Secret).
	Secret string   `json:"secret"`
	Env    string   `json:"env"`
	Hosts  []string `json:"hosts"`
	// In is where the placeholder may be swapped: "header:<name>" (default
	// "header:authorization"), "query", "path", "body".
	In []string `json:"in,omitempty"`
	// Prefix (at most 32 bytes) is prepended to the placeholder, for SDKs that check a key's
	// shape.
	Prefix string `json:"prefix,omitempty"`
	// OnViolation is "block" (default: 403 EGRESS_PLACEHOLDER_VIOLATION), "block_and_stop"
	// (also stops the sandbox) or "pass" (send the placeholder unchanged).
	OnViolation string `json:"onViolation,omitempty"`
}

// Egress event kinds (EgressEvent.Kind).
const (
	EgressEventDNS           = "dns"
	EgressEventConn          = "conn"
	EgressEventHTTP          = "http"
	EgressEventViolation     = "violation"
	EgressEventPolicyUpdated = "policy.updated"
	EgressEventLimit         = "limit"
)

// EgressEvent is one egress audit record of a sandbox, with a per-sandbox increasing Seq. It
// never holds header values, bodies or secret values.
type EgressEvent struct {
	Seq      uint64    `json:"seq"`
	TS       time.Time `json:"ts"`
	Sandbox  string    `json:"sandbox"`
	Kind     string    `json:"kind"`
	Decision string    `json:"decision,omitempty"` // allow, deny, intercept, tunnel, refused, closed, blocked
	Reason   string    `json:"reason,omitempty"`
	Rule     string    `json:"rule,omitempty"` // rule ID
	Mode     string    `json:"mode,omitempty"` // tunnel, intercept, http, tcp

	// DNS.
	QName   string `json:"qname,omitempty"`
	QType   string `json:"qtype,omitempty"`
	Rcode   string `json:"rcode,omitempty"`
	Answers int    `json:"answers,omitempty"`

	// Connections and requests. OrigDst is the address the sandbox dialled (ip:port);
	// Query is "redacted" when the request had one.
	Host      string   `json:"host,omitempty"`
	Port      int      `json:"port,omitempty"`
	OrigDst   string   `json:"origDst,omitempty"`
	Proto     string   `json:"proto,omitempty"`
	Method    string   `json:"method,omitempty"`
	Path      string   `json:"path,omitempty"`
	Query     string   `json:"query,omitempty"`
	Status    int      `json:"status,omitempty"`
	ReqBytes  int64    `json:"reqBytes,omitempty"`
	RespBytes int64    `json:"respBytes,omitempty"`
	DurMs     int64    `json:"durMs,omitempty"`
	Upstream  string   `json:"upstream,omitempty"`
	Handler   string   `json:"handler,omitempty"`
	Injected  []string `json:"injected,omitempty"` // header names
	Secrets   []string `json:"secrets,omitempty"`  // secret names, never values
	Location  string   `json:"location,omitempty"` // violation: where the placeholder was found
	Redaction int      `json:"redactions,omitempty"`
	ECH       bool     `json:"ech,omitempty"`

	// policy.updated: the host lists added and removed, and the connections it closed.
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	Closed  int      `json:"closed,omitempty"`

	// limit: what was limited ("dns", "connections").
	Limit string `json:"limit,omitempty"`
}

// EgressEventFrame is one SSE frame of GET /v1/sandboxes/{id}/egress/events?since=SEQ
// [&follow=true] (or Last-Event-ID: SEQ): Type "event" with the event's fields alongside and
// an "id: <seq>" line, oldest first, from seq > since; or Type "error" (Code, Error). Without
// follow the stream ends after the stored events.
type EgressEventFrame struct {
	Type string `json:"type"`
	EgressEvent
	Code  errdefs.Code `json:"code,omitempty"`
	Error string       `json:"error,omitempty"`
}
