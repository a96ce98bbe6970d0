package netns

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netns"

	"github.com/hutchdev/hutch/errdefs"
)

// Dial connects to addr from inside the network namespace at nsPath (a bind-mounted namespace
// file such as Net.NSPath): the socket is created on a thread switched into that namespace and
// stays bound to it after the thread has switched back, so the returned conn is used like any
// other. network is "tcp", "tcp4" or "tcp6"; addr must be a literal "ip:port" (no name lookup
// happens inside the namespace). Errors: a bad network or addr → errdefs.ErrInvalidArgument; a
// missing namespace → errdefs.ErrNotFound; the dial's own error (ECONNREFUSED when nothing
// listens, detectable with errors.Is(err, syscall.ECONNREFUSED)) otherwise, wrapped.
func Dial(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("netns: dial: network %q is not tcp, tcp4 or tcp6: %w", network, errdefs.ErrInvalidArgument)
	}
	if _, err := netip.ParseAddrPort(addr); err != nil {
		return nil, fmt.Errorf("netns: dial: %q is not a literal ip:port: %w", addr, errdefs.ErrInvalidArgument)
	}
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return nil, fmt.Errorf("netns: open namespace %s: %w: %w", nsPath, errdefs.ErrNotFound, err)
	}
	defer ns.Close()
	var conn net.Conn
	err = inNS(ns, func() error {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return err
		}
		conn = c
		return nil
	})
	if err != nil {
		if conn != nil {
			conn.Close() // the thread could not be restored; the socket itself was fine
		}
		return nil, fmt.Errorf("netns: dial %s in %s: %w", addr, nsPath, err)
	}
	return conn, nil
}
