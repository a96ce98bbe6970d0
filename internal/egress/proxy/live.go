package proxy

import (
	"context"
	"net/http"

	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/inject"
	"github.com/hutchdev/hutch/internal/egress/policy"
)

// connDest records what a connection was allowed for, so a policy change can re-check it.
type connDest struct {
	kind policy.Kind // KindHTTP (port 80), KindTLS, KindTCP; 0 = not decided yet
	host string      // canonical host (Host header, SNI or pinned name)
	// intercepted is true for TLS connections terminated by the proxy (requests evaluated one
	// by one); false for tunnels.
	intercepted bool
	// method and path are the latest request's on HTTP and intercepted connections.
	method, path string
	upstream     bool
}

// setDest records the decision a connection got: kind, canonical host, and whether TLS is
// terminated (intercepted) rather than spliced. The intercept path calls it with
// (policy.KindTLS, sni, true) once it decided to terminate.
func (c *conn) setDest(kind policy.Kind, host string, intercepted, upstream bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dest = connDest{kind: kind, host: host, intercepted: intercepted, upstream: upstream}
}

// setRequest records the request being served on an HTTP or intercepted connection.
func (c *conn) setRequest(host, method, path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dest.kind == policy.KindHTTP {
		c.dest.host = host
	}
	c.dest.method, c.dest.path = method, path
}

// stillAllowed re-evaluates the connection against pol: tunnels (spliced TLS, other-port TCP)
// need Allow (an Intercept now means rules apply that the tunnel would bypass); plain-HTTP and
// intercepted connections need the host not to be denied and their latest request not to be
// denied by a rule.
func (c *conn) stillAllowed(ctx context.Context, pol policy.Policy) bool {
	c.mu.Lock()
	d := c.dest
	c.mu.Unlock()
	if d.kind == 0 {
		return true // still peeking or parsing: it will be decided against the new policy
	}
	dec := pol.Decide(ctx, policy.Request{SandboxID: c.sandboxID, Kind: d.kind, Host: d.host, Port: int(c.orig.Port()), Upstream: d.upstream})
	if d.kind == policy.KindTCP || (d.kind == policy.KindTLS && !d.intercepted) {
		return dec.Action == policy.Allow
	}
	if dec.Action == policy.Deny {
		return false
	}
	if d.method != "" {
		return policy.SnapshotFor(pol, c.sandboxID).Request(d.host, d.method, d.path).Action == policy.Allow
	}
	return true
}

// Recheck re-evaluates every open connection of sandboxID against the current Policy and
// closes those no longer allowed (EGRESS.md D9): tunnels whose host is not plainly allowed
// any more, plain-HTTP and intercepted connections whose host or latest request is now
// denied. Idle upstream connections of the sandbox are dropped too, so the next request dials
// afresh. It returns how many connections were closed.
func (p *Proxy) Recheck(ctx context.Context, sandboxID string) int {
	p.mu.Lock()
	var cs []*conn
	for c := range p.conns[sandboxID] {
		cs = append(cs, c)
	}
	var idle []*http.Transport
	if t := p.transports[sandboxID]; t != nil {
		idle = append(idle, t)
	}
	p.mu.Unlock()
	for _, t := range idle {
		t.CloseIdleConnections()
	}
	if p.icpt != nil {
		p.icpt.forget(sandboxID)
	}
	closed := 0
	for _, c := range cs {
		if !c.stillAllowed(ctx, p.cfg.Policy) {
			c.Close()
			closed++
			c.mu.Lock()
			d := c.dest
			c.mu.Unlock()
			p.cfg.Audit(sandboxID, audit.Event{Kind: audit.KindConn, Decision: "closed", Reason: "no longer allowed after a policy change",
				Host: inject.MaskPlaceholders(d.host), Port: int(c.orig.Port()), OrigDst: c.orig.String(), Method: d.method, Path: inject.MaskPlaceholders(d.path)})
		}
	}
	if closed > 0 {
		p.log.Debug("egress policy change closed connections", "sandbox_id", sandboxID, "closed", closed)
	}
	return closed
}
