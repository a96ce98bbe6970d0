package egress

import (
	"context"
	"fmt"
	"sort"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/policy"
)

// Registry returns the per-sandbox policy registry, or nil when Config.Policy was set to a
// custom Policy (then per-sandbox Specs cannot be installed).
func (s *Service) Registry() *policy.Registry { return s.registry }

// SetPolicy installs c as sandboxID's policy (nil = allow-all), live: DNS answers, new
// connections and the next request on an open connection use it at once, and open
// connections it no longer allows are closed (proxy.Recheck). c must come from
// policy.Compile of a Spec that passed policy.Validate. The sandbox need not be registered
// yet (policies are loaded before sandboxes are re-adopted). Errors:
// errdefs.ErrFailedPrecondition when the Service runs a custom Config.Policy.
func (s *Service) SetPolicy(sandboxID string, c *policy.Compiled) error {
	if s.registry == nil {
		return fmt.Errorf("egress: a custom policy is configured, per-sandbox policies are unavailable: %w", errdefs.ErrFailedPrecondition)
	}
	s.registry.Set(sandboxID, c)
	return nil
}

// Policy returns sandboxID's current policy (nil = allow-all, also when a custom
// Config.Policy runs).
func (s *Service) Policy(sandboxID string) *policy.Compiled {
	if s.registry == nil {
		return nil
	}
	return s.registry.Snapshot(sandboxID)
}

// DeletePolicy forgets sandboxID's policy (call it when the sandbox is destroyed).
func (s *Service) DeletePolicy(sandboxID string) {
	if s.registry != nil {
		s.registry.Delete(sandboxID)
	}
}

// policyChanged runs after every registry change: open connections are re-checked and a
// policy.updated audit event lists the host patterns added and removed (allow, deny and rule
// hosts; never secret values).
func (s *Service) policyChanged(sandboxID string, old, new *policy.Compiled) {
	closed := s.proxy.Recheck(context.Background(), sandboxID) //nolint:forbidigo // a policy-change callback, without a ctx
	added, removed := hostDiff(old, new)
	s.cfg.Audit.Emit(sandboxID, audit.Event{Kind: audit.KindPolicyUpdated, Decision: new.Mode(), Added: added, Removed: removed, Closed: closed})
	s.log.Info("egress policy updated", "sandbox_id", sandboxID, "mode", new.Mode(), "closed_connections", closed)
}

// hostDiff lists "allow:", "deny:" and "rule:<id>:" host entries present only in new (added)
// or only in old (removed), sorted.
func hostDiff(old, new *policy.Compiled) (added, removed []string) {
	set := func(c *policy.Compiled) map[string]bool {
		sp := c.Spec()
		m := map[string]bool{"mode:" + c.Mode(): true}
		for _, h := range sp.Allow {
			m["allow:"+h] = true
		}
		for _, h := range sp.Deny {
			m["deny:"+h] = true
		}
		for _, r := range sp.Rules {
			for _, h := range r.Hosts {
				m["rule:"+r.ID+":"+h] = true
			}
		}
		return m
	}
	o, n := set(old), set(new)
	for k := range n {
		if !o[k] {
			added = append(added, k)
		}
	}
	for k := range o {
		if !n[k] {
			removed = append(removed, k)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	return added, removed
}
