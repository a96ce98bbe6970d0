package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"golang.org/x/sys/unix"
)

// conn is an accepted, identified sandbox connection. Closing it also closes any upstream
// attached to it, and removes it from the Proxy's tracking.
type conn struct {
	*net.TCPConn
	p         *Proxy
	sandboxID string
	orig      netip.AddrPort // original destination (SO_ORIGINAL_DST)

	mu sync.Mutex
	// attached are upstream connections closed together with this one.
	attached []net.Conn
	// closed is set by the first Close.
	closed bool
	// dest is what the connection was authorised for (setDest, setRequest); the zero value
	// until a decision was made. Proxy.Recheck re-evaluates it on policy changes.
	dest connDest
}

// Close closes the connection and everything attached to it; it is idempotent.
func (c *conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	att := c.attached
	c.attached = nil
	c.mu.Unlock()
	for _, a := range att {
		a.Close()
	}
	c.p.mu.Lock()
	if set := c.p.conns[c.sandboxID]; set != nil {
		if _, ok := set[c]; ok {
			c.p.open--
		}
		delete(set, c)
		if len(set) == 0 {
			delete(c.p.conns, c.sandboxID)
		}
	}
	c.p.mu.Unlock()
	return c.TCPConn.Close()
}

// attach ties up's lifetime to c. If c is already closed, up is closed at once and false is
// returned.
func (c *conn) attach(up net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		up.Close()
		return false
	}
	c.attached = append(c.attached, up)
	return true
}

// identListener yields only connections from registered sandboxes, redirected by the firewall
// and arriving on their own gateway address; others are closed silently.
type identListener struct {
	net.Listener
	p *Proxy
}

// Accept returns the next identified connection as a *conn.
func (l *identListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept() // connlimit.Retrying: fails only once closed
		if err != nil {
			return nil, err
		}
		tc, ok := c.(*net.TCPConn)
		if !ok {
			c.Close()
			continue
		}
		cc, err := l.p.identify(tc)
		if err != nil {
			l.p.log.Debug("egress connection refused", "remote", tc.RemoteAddr(), "err", err)
			tc.Close()
			continue
		}
		return cc, nil
	}
}

// identify checks tc and registers it.
func (p *Proxy) identify(tc *net.TCPConn) (*conn, error) {
	remote := tc.RemoteAddr().(*net.TCPAddr).AddrPort()
	local := tc.LocalAddr().(*net.TCPAddr).AddrPort()
	id, gw, ok := p.cfg.Identify(remote.Addr().Unmap())
	if !ok {
		return nil, fmt.Errorf("unknown source %s", remote.Addr())
	}
	if local.Addr().Unmap() != gw {
		return nil, fmt.Errorf("sandbox %s arrived on %s, not its gateway %s", id, local.Addr(), gw)
	}
	orig, err := originalDst(tc)
	if err != nil {
		return nil, err
	}
	if orig.Addr() == local.Addr().Unmap() && orig.Port() == local.Port() {
		return nil, errors.New("connection was not redirected (direct hit on the proxy port)")
	}
	c := &conn{TCPConn: tc, p: p, sandboxID: id, orig: orig}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, net.ErrClosed
	}
	if err := p.admitConn(id, len(p.conns[id]), p.open); err != nil { // limit.go: the caps
		return nil, err
	}
	p.open++
	set := p.conns[id]
	if set == nil {
		set = map[*conn]struct{}{}
		p.conns[id] = set
	}
	set[c] = struct{}{}
	return c, nil
}

// originalDst reads the pre-REDIRECT destination of tc from conntrack (SO_ORIGINAL_DST). The
// kernel fills a sockaddr_in; GetsockoptIPv6Mreq is used only as a 16-byte buffer for it.
func originalDst(tc *net.TCPConn) (netip.AddrPort, error) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	var mreq *unix.IPv6Mreq
	var serr error
	if err := rc.Control(func(fd uintptr) {
		mreq, serr = unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
	}); err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	if serr != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination (SO_ORIGINAL_DST): %w", serr)
	}
	b := mreq.Multiaddr
	port := binary.BigEndian.Uint16(b[2:4])
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}), port), nil
}
