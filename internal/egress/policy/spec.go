package policy

// Spec is a sandbox's egress policy as the API carries it (JSON), following
// ../shared/docs/EGRESS.md §4.1. The zero Spec is {"mode":"allow-all"}: every public
// destination on ports 80 and 443, nothing intercepted.
//
// Evaluation order (EGRESS.md §4.1): the address floor; Deny globs; Mode (allowlist needs an
// Allow match, or a rule of action handler or with an upstream for the host); the rules for the
// host, most specific host pattern first then list order, first whose Match matches wins; no
// rule → pass (plain proxy or tunnel).
//
// Cloudflare's options map onto it: allowedHosts → Allow (and Mode "allowlist"),
// deniedHosts → Deny, enableInternet:false → Mode "allowlist" (or "deny-all" with no Allow),
// interceptHttps → implied by Rules, outboundByHost → Rules with action "handler",
// setOutboundByHost() → PATCH of the policy.
type Spec struct {
	// Mode is "allow-all" (default), "allowlist" or "deny-all".
	Mode string `json:"mode,omitempty"`
	// Allow and Deny are host patterns: an exact canonical name, "*.suffix" (one or more whole
	// leftmost labels; "*.github.com" does not match "github.com") or "*". Deny wins.
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// Ports are the TCP destination ports allowed besides 80 and 443 (1–65535).
	Ports []int `json:"ports,omitempty"`
	// Inspect is "rules" (default: intercept TLS only for hosts with Rules or Placeholders),
	// "all" (intercept every allowed TLS host) or "none" (never; Rules are then an error).
	Inspect string `json:"inspect,omitempty"`
	// DNS says how denied names are answered.
	DNS DNSSpec `json:"dns,omitempty"`
	// Rules act on requests to their hosts (header injection, deny, handler, upstream route).
	Rules []Rule `json:"rules,omitempty"`
	// Placeholders bind secrets to env vars holding a placeholder the proxy swaps for the real
	// value only towards Hosts.
	Placeholders []Placeholder `json:"placeholders,omitempty"`
}

// DNSSpec configures DNS answers for denied names.
type DNSSpec struct {
	// Denied is "nxdomain" (default: NXDOMAIN with EDE 15 "Blocked", never forwarded upstream).
	Denied string `json:"denied,omitempty"`
}

// Rule is one per-host rule (EGRESS.md §4.1, §5).
type Rule struct {
	// ID names the rule in audit events; unique within the Spec; [a-z0-9_-]{1,64}.
	ID string `json:"id"`
	// Hosts are host patterns as in Spec.Allow.
	Hosts []string `json:"hosts"`
	// Match narrows the rule to some requests; empty matches all.
	Match *Match `json:"match,omitempty"`
	// Action is "inject", "deny", "handler" or "pass".
	Action string `json:"action"`
	// Inject says which headers to set or remove (action "inject").
	Inject *Inject `json:"inject,omitempty"`
	// Handler names an operator handler from hutchd's config (action "handler").
	Handler string `json:"handler,omitempty"`
	// Upstream names an operator upstream from hutchd's config: the request goes there instead
	// of the public address of the host (any action but "deny" and "handler").
	Upstream string `json:"upstream,omitempty"`
}

// Match selects requests by method and path.
type Match struct {
	Methods []string   `json:"methods,omitempty"` // upper-case HTTP methods; empty = any
	Path    *PathMatch `json:"path,omitempty"`
}

// PathMatch matches the request path (without the query): Exact or Prefix (one of them).
type PathMatch struct {
	Exact  string `json:"exact,omitempty"`
	Prefix string `json:"prefix,omitempty"`
}

// Inject sets or removes request headers. Values are templates: "${secrets.NAME}" is replaced
// by the secret's value at request time (NAME must exist when the policy is set). Injected
// headers replace what the sandbox sent.
type Inject struct {
	SetHeaders    map[string]string `json:"setHeaders,omitempty"`
	RemoveHeaders []string          `json:"removeHeaders,omitempty"`
	BasicAuth     *BasicAuth        `json:"basicAuth,omitempty"`
}

// BasicAuth sets Authorization: Basic base64(username ":" password); both are templates.
type BasicAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// Placeholder binds a secret to an env var of the sandbox (EGRESS.md §5.2).
type Placeholder struct {
	Secret string   `json:"secret"`           // secret name (must exist)
	Env    string   `json:"env"`              // env var name in the sandbox; default = Secret
	Hosts  []string `json:"hosts"`            // host patterns the real value may go to (must be allowed)
	In     []string `json:"in,omitempty"`     // "header:authorization" (default), "header:<name>", "query", "path", "body"
	Prefix string   `json:"prefix,omitempty"` // prepended to the placeholder, for SDKs that check a key's shape
	// OnViolation is "block" (default: 403 EGRESS_PLACEHOLDER_VIOLATION), "block_and_stop"
	// (also stops the sandbox) or "pass" (send the placeholder unchanged).
	OnViolation string `json:"onViolation,omitempty"`
}
