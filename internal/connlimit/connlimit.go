// Package connlimit caps the client connections a listener holds open, so that a flood of
// idle or half-sent connections (slowloris) cannot take all of a process's file descriptors.
//
// A Limiter counts the connections accepted through the listeners it wraps: in total, and per
// client IP address those not yet trusted. A connection is trusted once its server has seen a
// valid credential on it (Trust, TrustKey): the API token, a preview URL's token. Over a cap,
// the oldest untrusted connection of that address (over the per-address cap) or of all (over
// the total) is closed to make room; over the total with every open connection trusted, the
// oldest idle one (between two requests, told by ConnState) is closed, and only when none is
// idle is the new one closed at once. Closing the oldest rather than the newest keeps a flood
// from locking out the next real client: that client's connection, the newest, presents its
// credential within milliseconds, while the flood, which never authenticates, keeps closing
// its own. A credential one party holds (a preview URL's token, TrustKey) trusts at most
// PerKey connections, so its holder cannot make every connection trusted and busy; the
// connections past it stay untrusted. Closed connections are counted in a log line written at
// most once per LogInterval.
package connlimit

import (
	"container/list"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// LogInterval is the least time between two "connections closed over the cap" log lines of one
// Limiter; what happens between them is summed into the next.
const LogInterval = 10 * time.Second

// Limits are a Limiter's caps; 0 means no cap.
type Limits struct {
	// PerAddr is how many untrusted connections one client IP address may hold open.
	PerAddr int
	// Total is how many connections, trusted or not, all clients together may hold open.
	Total int
	// PerKey is how many connections one key of TrustKey (a preview URL's sandbox) may have
	// trusted at once; those past it stay untrusted.
	PerKey int
}

// Limiter caps the connections of the listeners it wraps (Wrap); several listeners may share
// one, and so one budget. It is safe for concurrent use.
type Limiter struct {
	name string
	lim  Limits
	log  *slog.Logger
	now  func() time.Time // tests set it

	mu        sync.Mutex
	open      int                       // guarded by mu: every open connection
	untrusted *list.List                // guarded by mu: untrusted *Conn, oldest first
	byAddr    map[netip.Addr]*list.List // guarded by mu: untrusted *Conn per address, oldest first
	idle      *list.List                // guarded by mu: trusted idle *Conn, longest idle first
	byKey     map[string]int            // guarded by mu: trusted connections per TrustKey key
	// evicted and refused count connections closed over a cap since the last log line.
	evicted, refused int       // guarded by mu
	lastLog          time.Time // guarded by mu
}

// New returns a Limiter enforcing lim; name says in its log lines which listener it guards.
func New(name string, lim Limits, log *slog.Logger) *Limiter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Limiter{name: name, lim: lim, log: log, now: time.Now, untrusted: list.New(), byAddr: map[netip.Addr]*list.List{},
		idle: list.New(), byKey: map[string]int{}}
}

// Open is how many connections are open through l.
func (l *Limiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Wrap returns ln with its accepted connections counted against l. The returned listener's
// connections are *Conn; its Accept retries every error but net.ErrClosed (Retrying).
func (l *Limiter) Wrap(ln net.Listener) net.Listener {
	return &listener{Listener: Retrying(ln, l.name, l.log), l: l}
}

type listener struct {
	net.Listener
	l *Limiter
}

func (ln *listener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := ln.l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// Conn is a connection counted by a Limiter until it is closed.
type Conn struct {
	net.Conn
	l    *Limiter
	addr netip.Addr // invalid for a non-IP peer: no per-address count

	// Guarded by l.mu:
	released bool          // no longer counted (closed, or evicted)
	trusted  bool          // Trust or TrustKey took it off the untrusted lists
	key      string        // its TrustKey key, counted in l.byKey while it is open
	keyed    bool          // key is counted
	idle     bool          // between two requests (ConnState)
	all      *list.Element // in l.untrusted; nil once trusted
	mine     *list.Element // in l.byAddr[addr]; nil once trusted or for an invalid addr
	idleAt   *list.Element // in l.idle while trusted and idle
}

// Close closes the connection and stops counting it.
func (c *Conn) Close() error {
	c.l.release(c)
	return c.Conn.Close()
}

// NetConn is the wrapped connection.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Trust marks c trusted: it no longer counts against its address's cap and is closed to make
// room for another only when idle and the total is reached. It still counts in the total.
// For a credential the operator alone holds (the API token).
func (c *Conn) Trust() { c.trust("", false) }

// TrustKey is Trust for a credential of key (a preview URL's sandbox): c is trusted only while
// key has fewer than PerKey trusted connections, else it stays untrusted. A trusted connection
// keeps its first key.
func (c *Conn) TrustKey(key string) { c.trust(key, true) }

func (c *Conn) trust(key string, keyed bool) {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released || c.trusted {
		return
	}
	if keyed {
		if l.lim.PerKey > 0 && l.byKey[key] >= l.lim.PerKey {
			return
		}
		l.byKey[key]++
		c.key, c.keyed = key, true
	}
	c.trusted = true
	l.detach(c)
	l.markIdle(c)
}

// setIdle records whether c is between two requests.
func (c *Conn) setIdle(idle bool) {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released || c.idle == idle {
		return
	}
	c.idle = idle
	l.markIdle(c)
}

// markIdle puts trusted c on or off l.idle as c.idle says; l.mu is held.
func (l *Limiter) markIdle(c *Conn) {
	switch {
	case c.trusted && c.idle && c.idleAt == nil:
		c.idleAt = l.idle.PushBack(c)
	case (!c.trusted || !c.idle) && c.idleAt != nil:
		l.idle.Remove(c.idleAt)
		c.idleAt = nil
	}
}

// remoteAddr is c's peer IP address, IPv4-mapped addresses unmapped; invalid when the peer has
// none (a unix socket).
func remoteAddr(c net.Conn) netip.Addr {
	switch a := c.RemoteAddr().(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// admit counts c in, closing the connections it displaces, and returns it wrapped; or it closes
// c and returns nil when every open connection is trusted and the total is reached.
func (l *Limiter) admit(c net.Conn) *Conn {
	lc := &Conn{Conn: c, l: l, addr: remoteAddr(c)}
	var victims []*Conn
	l.mu.Lock()
	if q := l.byAddr[lc.addr]; l.lim.PerAddr > 0 && q != nil && q.Len() >= l.lim.PerAddr {
		victims = append(victims, l.evict(q.Front().Value.(*Conn)))
	}
	if l.lim.Total > 0 && l.open >= l.lim.Total {
		if e := l.untrusted.Front(); e != nil {
			victims = append(victims, l.evict(e.Value.(*Conn)))
		} else if e := l.idle.Front(); e != nil {
			victims = append(victims, l.evict(e.Value.(*Conn)))
		} else {
			l.refused++
			l.noteLocked()
			l.mu.Unlock()
			c.Close()
			return nil
		}
	}
	l.open++
	lc.all = l.untrusted.PushBack(lc)
	if lc.addr.IsValid() {
		q := l.byAddr[lc.addr]
		if q == nil {
			q = list.New()
			l.byAddr[lc.addr] = q
		}
		lc.mine = q.PushBack(lc)
	}
	if len(victims) > 0 {
		l.noteLocked()
	}
	l.mu.Unlock()
	for _, v := range victims {
		v.Conn.Close()
	}
	return lc
}

// evict stops counting v, to be closed by the caller once l.mu is released; l.mu is held.
func (l *Limiter) evict(v *Conn) *Conn {
	l.releaseLocked(v)
	l.evicted++
	return v
}

func (l *Limiter) release(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked(c)
}

func (l *Limiter) releaseLocked(c *Conn) {
	if c.released {
		return
	}
	c.released = true
	l.open--
	l.detach(c)
	if c.idleAt != nil {
		l.idle.Remove(c.idleAt)
		c.idleAt = nil
	}
	if c.keyed {
		if l.byKey[c.key]--; l.byKey[c.key] <= 0 {
			delete(l.byKey, c.key)
		}
		c.keyed = false
	}
}

// detach takes c off the untrusted lists; l.mu is held.
func (l *Limiter) detach(c *Conn) {
	if c.all != nil {
		l.untrusted.Remove(c.all)
		c.all = nil
	}
	if c.mine != nil {
		q := l.byAddr[c.addr]
		q.Remove(c.mine)
		c.mine = nil
		if q.Len() == 0 {
			delete(l.byAddr, c.addr)
		}
	}
}

// noteLocked writes the log line of the connections closed over a cap, at most once per
// LogInterval; l.mu is held.
func (l *Limiter) noteLocked() {
	now := l.now()
	if now.Sub(l.lastLog) < LogInterval {
		return
	}
	l.log.Warn("connections closed over the cap", "listener", l.name, "evicted", l.evicted, "refused", l.refused,
		"open", l.open, "max_per_address", l.lim.PerAddr, "max_total", l.lim.Total)
	l.lastLog = now
	l.evicted, l.refused = 0, 0
}

// connKey is the context key of a request's *Conn.
type connKey struct{}

// ConnState is an http.Server ConnState that tells the Limiter which connections are idle
// (StateIdle: between two requests), the ones it may close when the total is reached though
// they are trusted. Without it every trusted connection counts as busy.
func ConnState(c net.Conn, s http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if lc, ok := c.(*Conn); ok {
		switch s {
		case http.StateIdle:
			lc.setIdle(true)
		case http.StateActive, http.StateHijacked:
			lc.setIdle(false)
		}
	}
}

// ConnContext is an http.Server ConnContext that remembers c's *Conn (also below TLS) for
// Trust.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if lc, ok := c.(*Conn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// Trust marks the connection of ctx trusted (see Conn.Trust); without one (ConnContext was not
// set, or the listener is not wrapped) it does nothing.
func Trust(ctx context.Context) {
	if lc, ok := ctx.Value(connKey{}).(*Conn); ok {
		lc.Trust()
	}
}

// TrustKey marks the connection of ctx trusted for key (see Conn.TrustKey), like Trust.
func TrustKey(ctx context.Context, key string) {
	if lc, ok := ctx.Value(connKey{}).(*Conn); ok {
		lc.TrustKey(key)
	}
}
