package proxy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/blocked"
	"github.com/hutchdev/hutch/internal/egress/policy"
)

// Pin table limits.
const (
	pinGrace      = 60 * time.Second // kept this long past the DNS answer's TTL
	maxPinsPerBox = 4096             // addresses remembered per sandbox
)

// Pins is the pin table of the other-port listener (EGRESS.md §2.4): per sandbox, which names
// hutchd's DNS answered each address for, kept for the answer's TTL plus a minute. A TCP
// connection to a port other than 80/443 carries no name, so the names its address was
// served for stand in: the connection is allowed when the policy allows one of them on that
// port. Safe for concurrent use; the zero value is not usable (NewPins).
type Pins struct {
	mu sync.Mutex
	// m maps sandbox → address → name → expiry.
	m map[string]map[netip.Addr]map[string]time.Time
}

// NewPins returns an empty pin table.
func NewPins() *Pins { return &Pins{m: map[string]map[netip.Addr]map[string]time.Time{}} }

// Add records that host resolved to ips for sandboxID, for ttl (plus a minute of grace).
// Expired entries are pruned; past maxPinsPerBox addresses, new ones are not recorded (the
// connection is then refused, never wrongly allowed).
func (p *Pins) Add(sandboxID, host string, ips []netip.Addr, ttl time.Duration) {
	now := time.Now()
	exp := now.Add(ttl + pinGrace)
	p.mu.Lock()
	defer p.mu.Unlock()
	box := p.m[sandboxID]
	if box == nil {
		box = map[netip.Addr]map[string]time.Time{}
		p.m[sandboxID] = box
	}
	for ip, names := range box {
		for n, e := range names {
			if now.After(e) {
				delete(names, n)
			}
		}
		if len(names) == 0 {
			delete(box, ip)
		}
	}
	for _, ip := range ips {
		ip = ip.Unmap()
		names := box[ip]
		if names == nil {
			if len(box) >= maxPinsPerBox {
				continue
			}
			names = map[string]time.Time{}
			box[ip] = names
		}
		names[host] = exp
	}
}

// Names returns the unexpired names ip was served for to sandboxID, sorted.
func (p *Pins) Names(sandboxID string, ip netip.Addr) []string {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for n, e := range p.m[sandboxID][ip.Unmap()] {
		if now.Before(e) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Forget drops sandboxID's pins.
func (p *Pins) Forget(sandboxID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, sandboxID)
}

// StartOther serves the other-port listener on ln in the background: TCP to ports other than
// 80 and 443. Nothing is read before the decision (server-first protocols such as SSH must
// not stall). Config.Pins is required. The Proxy owns ln.
func (p *Proxy) StartOther(ln net.Listener) error {
	if p.cfg.Pins == nil {
		return errors.New("proxy: the other-port listener needs Config.Pins")
	}
	return p.serveConns(ln, "other-port", p.serveOther)
}

// serveOther decides one other-port connection by the names pinned to its destination
// address, then dials that address (floor-checked) and splices. Refusals reset the
// connection (RST) and are audited.
func (p *Proxy) serveOther(c *conn) {
	defer c.Close()
	port := int(c.orig.Port())
	log := p.log.With("sandbox_id", c.sandboxID, "orig_dst", c.orig.String())
	ev := audit.Event{Kind: audit.KindConn, Mode: "tcp", OrigDst: c.orig.String(), Port: port}
	refuse := func(reason string) {
		ev.Decision, ev.Reason = "refused", reason
		p.cfg.Audit(c.sandboxID, ev)
		log.Debug("egress tcp refused", "reason", reason)
		c.TCPConn.SetLinger(0) // close with RST
	}
	names := p.cfg.Pins.Names(c.sandboxID, c.orig.Addr())
	if len(names) == 0 {
		refuse("no name was resolved to this address through hutchd's DNS")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout) //nolint:forbidigo // a proxied connection is its own root; the timeout bounds it
	defer cancel()
	var host, reason string
	for _, n := range names {
		if blocked.DeniedName(n) {
			continue
		}
		d := p.cfg.Policy.Decide(ctx, policy.Request{SandboxID: c.sandboxID, Kind: policy.KindTCP, Host: n, Port: port})
		if d.Action == policy.Allow {
			host = n
			break
		}
		reason = d.Reason
	}
	if host == "" {
		ev.Host = names[0]
		if reason == "" {
			reason = "denied"
		}
		refuse(reason)
		return
	}
	ev.Host = host
	up, err := p.dialAddr(ctx, c.orig)
	if err != nil {
		if errdefs.IsCode(err, errdefs.CodeEgressDenied) {
			refuse("address floor")
			return
		}
		ev.Decision, ev.Reason = "error", "upstream unreachable"
		p.cfg.Audit(c.sandboxID, ev)
		c.TCPConn.SetLinger(0)
		return
	}
	if !c.attach(up) {
		return
	}
	c.setDest(policy.KindTCP, host, false, false)
	start := time.Now()
	ev.Decision = "tunnel"
	log.Debug("egress tcp tunnel", "host", host)
	splice(c.TCPConn, up)
	ev.DurMs = time.Since(start).Milliseconds()
	p.cfg.Audit(c.sandboxID, ev)
}

// dialAddr connects to ap through the guard (floor check and mark before connect(2)).
func (p *Proxy) dialAddr(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout, ControlContext: p.guard}
	return d.DialContext(ctx, "tcp", net.JoinHostPort(ap.Addr().String(), strconv.Itoa(int(ap.Port()))))
}
