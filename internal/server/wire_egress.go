package server

import (
	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/policy"
)

// This file maps egress policies and audit events to and from their api/v1 wire form. The
// domain types policy.Spec and audit.Event keep their JSON tags: a policy is stored as JSON
// (SQLite, the configuration file's default policy) and events in the egress JSONL logs, and
// those formats must not change with the API's.

func toEgressPolicy(s policy.Spec) v1.EgressPolicy {
	out := v1.EgressPolicy{Mode: s.Mode, Allow: s.Allow, Deny: s.Deny, Ports: s.Ports, Inspect: s.Inspect,
		DNS: v1.EgressDNS{Denied: s.DNS.Denied}}
	if s.Rules != nil {
		out.Rules = make([]v1.EgressRule, len(s.Rules))
		for i, r := range s.Rules {
			out.Rules[i] = toEgressRule(r)
		}
	}
	if s.Placeholders != nil {
		out.Placeholders = make([]v1.EgressPlaceholder, len(s.Placeholders))
		for i, p := range s.Placeholders {
			out.Placeholders[i] = v1.EgressPlaceholder(p)
		}
	}
	return out
}

func toEgressRule(r policy.Rule) v1.EgressRule {
	out := v1.EgressRule{ID: r.ID, Hosts: r.Hosts, Action: r.Action, Handler: r.Handler, Upstream: r.Upstream}
	if r.Match != nil {
		out.Match = &v1.EgressMatch{Methods: r.Match.Methods}
		if r.Match.Path != nil {
			p := v1.EgressPathMatch(*r.Match.Path)
			out.Match.Path = &p
		}
	}
	if r.Inject != nil {
		out.Inject = &v1.EgressInject{SetHeaders: r.Inject.SetHeaders, RemoveHeaders: r.Inject.RemoveHeaders}
		if r.Inject.BasicAuth != nil {
			b := v1.EgressBasicAuth(*r.Inject.BasicAuth)
			out.Inject.BasicAuth = &b
		}
	}
	return out
}

func fromEgressPolicy(s v1.EgressPolicy) policy.Spec {
	out := policy.Spec{Mode: s.Mode, Allow: s.Allow, Deny: s.Deny, Ports: s.Ports, Inspect: s.Inspect,
		DNS: policy.DNSSpec{Denied: s.DNS.Denied}}
	if s.Rules != nil {
		out.Rules = make([]policy.Rule, len(s.Rules))
		for i, r := range s.Rules {
			out.Rules[i] = fromEgressRule(r)
		}
	}
	if s.Placeholders != nil {
		out.Placeholders = make([]policy.Placeholder, len(s.Placeholders))
		for i, p := range s.Placeholders {
			out.Placeholders[i] = policy.Placeholder(p)
		}
	}
	return out
}

func fromEgressRule(r v1.EgressRule) policy.Rule {
	out := policy.Rule{ID: r.ID, Hosts: r.Hosts, Action: r.Action, Handler: r.Handler, Upstream: r.Upstream}
	if r.Match != nil {
		out.Match = &policy.Match{Methods: r.Match.Methods}
		if r.Match.Path != nil {
			p := policy.PathMatch(*r.Match.Path)
			out.Match.Path = &p
		}
	}
	if r.Inject != nil {
		out.Inject = &policy.Inject{SetHeaders: r.Inject.SetHeaders, RemoveHeaders: r.Inject.RemoveHeaders}
		if r.Inject.BasicAuth != nil {
			b := policy.BasicAuth(*r.Inject.BasicAuth)
			out.Inject.BasicAuth = &b
		}
	}
	return out
}

// toEgressEvent is an audit event as the API sends it; the two types have the same fields.
func toEgressEvent(e audit.Event) v1.EgressEvent { return v1.EgressEvent(e) }
