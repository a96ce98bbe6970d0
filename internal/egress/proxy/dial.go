package proxy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/hutchdev/hutch/errdefs"
	"golang.org/x/sys/unix"
)

// dial connects to addr ("name:port", a name the proxy authorised). Operator upstreams are
// dialled at their configured address; every other name is resolved by the proxy's resolver
// and each candidate address is checked against the floor just before connect(2). A refusal
// is an *errdefs.Error with code EGRESS_DENIED somewhere in the returned error's chain.
func (p *Proxy) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("proxy: dial %q: %w", addr, err)
	}
	if up, ok := p.cfg.Upstreams[host]; ok {
		d := net.Dialer{Timeout: dialTimeout}
		return d.DialContext(ctx, "tcp", up.String())
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil, errdefs.Newf(errdefs.CodeEgressDenied, "egress to IP address %s is not allowed", host)
	}
	d := net.Dialer{Timeout: dialTimeout, Resolver: p.cfg.Resolver, ControlContext: p.guard}
	return d.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
}

// guard runs before connect(2) on every guarded socket: it refuses floor addresses and sets
// the guard mark.
func (p *Proxy) guard(_ context.Context, _, address string, c syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return errdefs.Newf(errdefs.CodeEgressDenied, "unparseable destination %q", address)
	}
	if p.cfg.Floor.Denied(ap.Addr()) {
		return errdefs.Newf(errdefs.CodeEgressDenied, "destination %s is a private, loopback, link-local or host address", ap.Addr())
	}
	if p.cfg.Mark == 0 {
		return nil
	}
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, p.cfg.Mark)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("proxy: set SO_MARK: %w", serr)
	}
	return nil
}
