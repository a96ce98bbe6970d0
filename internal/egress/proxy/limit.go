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

// MaxConns is the default and most of Config.MaxConns: how many proxied connections all
// sandboxes together may hold open at once; past it new ones are closed at accept like those
// over MaxConnsPerSandbox. With its upstream each costs hutchd two descriptors, so this bounds
// the proxy to 65,536 of them whatever the number of sandboxes. hutchd sets a lower cap from
// its RLIMIT_NOFILE when that is too low for it (internal/daemon, fdBudget).
const MaxConns = 32768

// capNotices throttles the "limit" audit event and log line to one per sandbox per second.
var capNotices sync.Map // capKey → time.Time of the last notice

type capKey struct {
	p  *Proxy
	id string
}

// admitConn reports whether sandboxID may open one more connection while it holds open ones
// and all sandboxes hold total; p.mu is held by the caller. A refusal is audited (at most once
// per second per sandbox).
func (p *Proxy) admitConn(sandboxID string, open, total int) error {
	if total >= p.maxConns {
		now := time.Now()
		if last, ok := capNotices.Load(capKey{p, ""}); !ok || now.Sub(last.(time.Time)) >= time.Second {
			capNotices.Store(capKey{p, ""}, now)
			p.log.Warn("egress connection cap of all sandboxes reached", "sandbox_id", sandboxID, "max", p.maxConns)
		}
		return fmt.Errorf("sandboxes hold %d egress connections (the cap of all)", total)
	}
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
