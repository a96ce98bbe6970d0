package policy

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Spec mode, inspect and rule action values.
const (
	ModeAllowAll  = "allow-all"
	ModeAllowlist = "allowlist"
	ModeDenyAll   = "deny-all"

	InspectRules = "rules"
	InspectAll   = "all"
	InspectNone  = "none"

	ActionInject  = "inject"
	ActionDeny    = "deny"
	ActionHandler = "handler"
	ActionPass    = "pass"
)

// Compiled is a validated Spec ready for evaluation. It is immutable and safe for concurrent
// use; a policy change builds a new Compiled (Compile) and swaps it in (Registry.Set).
//
// A nil *Compiled is valid and means the zero Spec (allow-all, nothing intercepted).
type Compiled struct {
	spec  Spec
	allow patterns
	deny  patterns
	ports map[int]bool
	rules []compiledRule
	// intercept are the host patterns of rules and placeholders: TLS to a matching host is
	// terminated (Inspect "rules").
	intercept patterns
	// local are the host patterns of handler rules and upstream routes: implicitly allowed in
	// allowlist mode, and answered with the gateway by DNS when nothing else allows them.
	local patterns
}

type compiledRule struct {
	rule  *Rule
	hosts patterns
	index int
}

// Compile builds the evaluator for s. It checks the shape of s (Validate with no secrets,
// handlers or upstreams lookups: those are the caller's job at API time) and fails with
// errdefs.CodeEgressPolicyInvalid. The Compiled keeps a deep copy of s.
func Compile(s Spec) (*Compiled, error) {
	if err := validate(&s, nil); err != nil {
		return nil, err
	}
	s = cloneSpec(s)
	c := &Compiled{spec: s, ports: map[int]bool{80: true, 443: true}}
	c.allow = mustPatterns(s.Allow)
	c.deny = mustPatterns(s.Deny)
	for _, p := range s.Ports {
		c.ports[p] = true
	}
	for i := range c.spec.Rules {
		r := &c.spec.Rules[i]
		hs := mustPatterns(r.Hosts)
		c.rules = append(c.rules, compiledRule{rule: r, hosts: hs, index: i})
		c.intercept = append(c.intercept, hs...)
		if r.Action == ActionHandler || (r.Upstream != "" && r.Action != ActionDeny) {
			c.local = append(c.local, hs...)
		}
	}
	for _, ph := range c.spec.Placeholders {
		c.intercept = append(c.intercept, mustPatterns(ph.Hosts)...)
	}
	return c, nil
}

func mustPatterns(ss []string) patterns {
	ps := make(patterns, 0, len(ss))
	for _, s := range ss {
		p, err := ParsePattern(s)
		if err != nil {
			panic("policy: pattern passed validation but does not parse: " + err.Error())
		}
		ps = append(ps, p)
	}
	return ps
}

// Spec returns a deep copy of the Spec c was compiled from (the zero Spec for nil).
func (c *Compiled) Spec() Spec {
	if c == nil {
		return Spec{}
	}
	return cloneSpec(c.spec)
}

// Mode returns the effective mode ("allow-all" when unset).
func (c *Compiled) Mode() string {
	if c == nil || c.spec.Mode == "" {
		return ModeAllowAll
	}
	return c.spec.Mode
}

// PortAllowed reports whether TCP destination port may be used (80, 443 and Spec.Ports).
func (c *Compiled) PortAllowed(port int) bool {
	if port == 80 || port == 443 {
		return true
	}
	return c != nil && c.ports[port]
}

// hostDecision evaluates host-level steps 2–3 of the order (deny globs, mode). The floor is
// the caller's (proxy, DNS) job.
func (c *Compiled) hostDecision(host string) Decision {
	if c == nil {
		return Decision{Action: Allow, Reason: "policy allow-all"}
	}
	if c.deny.match(host) {
		return Decision{Action: Deny, Reason: fmt.Sprintf("%s matches the policy's deny list", host)}
	}
	switch c.Mode() {
	case ModeDenyAll:
		return Decision{Action: Deny, Reason: "policy deny-all"}
	case ModeAllowlist:
		if c.allow.match(host) {
			return Decision{Action: Allow, Reason: "allowlist"}
		}
		if c.local.match(host) {
			return Decision{Action: Allow, Reason: "served by a handler or upstream route", Rule: c.localRule(host)}
		}
		return Decision{Action: Deny, Reason: fmt.Sprintf("%s is not on the policy's allowlist", host)}
	}
	return Decision{Action: Allow, Reason: "policy allow-all"}
}

// localRule returns the most specific handler/upstream rule for host.
func (c *Compiled) localRule(host string) *Rule {
	for _, cr := range c.rulesFor(host) {
		if cr.rule.Action == ActionHandler || (cr.rule.Upstream != "" && cr.rule.Action != ActionDeny) {
			return cr.rule
		}
	}
	return nil
}

// Evaluate decides req (its SandboxID is ignored): Deny, Allow, or for TLS and plain HTTP
// Intercept when requests to the host must be evaluated one by one (the host has rules or
// placeholders, or Inspect is "all" for TLS). DNS never gets Intercept. Ports other than 80,
// 443 and Spec.Ports are denied for Kind TLS, HTTP and TCP.
func (c *Compiled) Evaluate(req Request) Decision {
	if req.Kind != KindDNS && !c.PortAllowed(req.Port) {
		return Decision{Action: Deny, Reason: fmt.Sprintf("port %d is not allowed by the policy", req.Port)}
	}
	d := c.hostDecision(req.Host)
	if d.Action != Allow || c == nil || req.Kind == KindDNS || req.Kind == KindTCP {
		return d
	}
	switch {
	case c.spec.Inspect == InspectNone:
	case c.spec.Inspect == InspectAll && req.Kind == KindTLS,
		c.intercept.match(req.Host):
		d.Action = Intercept
		d.Reason = "host has rules: requests are evaluated one by one"
	}
	return d
}

// Decide implements Policy for a single Spec.
func (c *Compiled) Decide(_ context.Context, req Request) Decision { return c.Evaluate(req) }

// Local reports whether host is served only by a handler or an upstream route: DNS answers
// such names with the sandbox's gateway (the proxy routes them by Host/SNI), never asking
// upstream.
func (c *Compiled) Local(host string) bool {
	if c == nil || !c.local.match(host) || c.allow.match(host) {
		return false
	}
	return c.hostDecision(host).Action == Allow
}

// RequestDecision is the per-request answer for an intercepted connection or a plain-HTTP
// request.
type RequestDecision struct {
	// Action is Deny or Allow (never Intercept).
	Action Action
	// Rule is the rule that matched (nil when none did: pass). For Action Deny with a nil Rule
	// the host itself is no longer allowed.
	Rule *Rule
	// Reason is a short human explanation (403 bodies, audit).
	Reason string
}

// Request evaluates one HTTP request to host (canonical, see CanonicalHost), method (any case)
// and path (the decoded URL path; canonicalised with CanonicalPath here): the host-level
// decision first (deny list, mode), then the host's rules, most specific host pattern first
// then list order; the first rule whose Match matches wins. A rule of action "deny" denies;
// any other rule allows with Rule set; no rule allows with Rule nil (plain proxying).
// The returned Rule points into c and must not be modified.
func (c *Compiled) Request(host, method, p string) RequestDecision {
	d := c.hostDecision(host)
	if d.Action != Allow {
		return RequestDecision{Action: Deny, Reason: d.Reason}
	}
	method = strings.ToUpper(method)
	p = CanonicalPath(p)
	for _, cr := range c.rulesFor(host) {
		if !cr.rule.Match.matches(method, p) {
			continue
		}
		if cr.rule.Action == ActionDeny {
			return RequestDecision{Action: Deny, Rule: cr.rule, Reason: fmt.Sprintf("denied by rule %q", cr.rule.ID)}
		}
		return RequestDecision{Action: Allow, Rule: cr.rule, Reason: fmt.Sprintf("rule %q", cr.rule.ID)}
	}
	return RequestDecision{Action: Allow, Reason: d.Reason}
}

// rulesFor returns the rules whose hosts match host, most specific first, then list order.
func (c *Compiled) rulesFor(host string) []compiledRule {
	if c == nil {
		return nil
	}
	type scored struct {
		cr    compiledRule
		score int
	}
	var ms []scored
	for _, cr := range c.rules {
		if s := cr.hosts.best(host); s >= 0 {
			ms = append(ms, scored{cr, s})
		}
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].score > ms[j].score })
	out := make([]compiledRule, len(ms))
	for i, m := range ms {
		out[i] = m.cr
	}
	return out
}

// PlaceholdersFor returns the placeholders whose Hosts match host (pointers into c; do not
// modify).
func (c *Compiled) PlaceholdersFor(host string) []*Placeholder {
	if c == nil {
		return nil
	}
	var out []*Placeholder
	for i := range c.spec.Placeholders {
		ph := &c.spec.Placeholders[i]
		if mustPatterns(ph.Hosts).match(host) {
			out = append(out, ph)
		}
	}
	return out
}

func cloneSpec(s Spec) Spec {
	s.Allow = slices.Clone(s.Allow)
	s.Deny = slices.Clone(s.Deny)
	s.Ports = slices.Clone(s.Ports)
	rules := make([]Rule, len(s.Rules))
	for i, r := range s.Rules {
		r.Hosts = slices.Clone(r.Hosts)
		if r.Match != nil {
			m := *r.Match
			m.Methods = slices.Clone(m.Methods)
			if m.Path != nil {
				pm := *m.Path
				m.Path = &pm
			}
			r.Match = &m
		}
		if r.Inject != nil {
			in := *r.Inject
			if in.SetHeaders != nil {
				in.SetHeaders = make(map[string]string, len(r.Inject.SetHeaders))
				for k, v := range r.Inject.SetHeaders {
					in.SetHeaders[k] = v
				}
			}
			in.RemoveHeaders = slices.Clone(in.RemoveHeaders)
			if in.BasicAuth != nil {
				ba := *in.BasicAuth
				in.BasicAuth = &ba
			}
			r.Inject = &in
		}
		rules[i] = r
	}
	if s.Rules != nil {
		s.Rules = rules
	}
	phs := make([]Placeholder, len(s.Placeholders))
	for i, ph := range s.Placeholders {
		ph.Hosts = slices.Clone(ph.Hosts)
		ph.In = slices.Clone(ph.In)
		phs[i] = ph
	}
	if s.Placeholders != nil {
		s.Placeholders = phs
	}
	return s
}
