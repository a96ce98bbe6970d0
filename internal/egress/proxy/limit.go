package proxy

import (
	"fmt"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/egress/audit"
)

// MaxConnsPerSandbox is how many proxied connections (HTTP, TLS and other ports together) one
// sandbox may hold open at once (EGRESS.md §9, resource exhaustion). Connections over the cap
// are closed as soon as they are accepted, before any byte is read, so a flood of slow or
// idle connections from one sandbox costs hutchd at most this many sockets and goroutines for
// that sandbox (each also bounded by the 10 s ClientHello and 30 s header deadlines), and other
// sandboxes are unaffected.
const MaxConnsPerSandbox = 1024

// capNotices throttles the "limit" audit event and log line to one per sandbox per second.
var capNotices sync.Map // capKey → time.Time of the last notice

type capKey struct {
	p  *Proxy
	id string
}

// admitConn reports whether sandboxID may open one more connection while it holds open ones;
// p.mu is held by the caller. A refusal is audited (at most once per second per sandbox).
func (p *Proxy) admitConn(sandboxID string, open int) error {
	if open < MaxConnsPerSandbox {
		if open == 0 {
			capNotices.Delete(capKey{p, sandboxID}) // nothing open: forget the throttle
		}
		return nil
	}
	now := time.Now()
	if last, ok := capNotices.Load(capKey{p, sandboxID}); !ok || now.Sub(last.(time.Time)) >= time.Second {
		capNotices.Store(capKey{p, sandboxID}, now)
		p.log.Warn("egress connection cap reached", "sandbox_id", sandboxID, "max", MaxConnsPerSandbox)
		// Config.Audit must not block: it runs under p.mu here.
		p.cfg.Audit(sandboxID, audit.Event{Kind: audit.KindLimit, Limit: "connections", Decision: "refused",
			Reason: fmt.Sprintf("more than %d open egress connections", MaxConnsPerSandbox)})
	}
	return fmt.Errorf("sandbox %s holds %d egress connections (the cap)", sandboxID, open)
}
