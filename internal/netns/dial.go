package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
)

// Dial connects to addr from inside the network namespace at nsPath (a bind-mounted namespace
// file such as Net.NSPath). Only the socket(2) call runs on a thread switched into that
// namespace (a socket belongs to the namespace it was created in, for its whole life); the
// connect is non-blocking and waited for through Go's poller on no particular thread, so a
// sandbox whose server never accepts cannot pin OS threads. The returned conn is used like any
// other.
//
// network is "tcp", "tcp4" or "tcp6"; addr must be a literal "ip:port" of that family (no name
// lookup happens inside the namespace). ctx bounds the connect (its deadline and cancellation).
// Errors: a bad network or addr → errdefs.ErrInvalidArgument; a missing namespace →
// errdefs.ErrNotFound; ctx ended → ctx's error, wrapped; the connect's own error (ECONNREFUSED
// when nothing listens, detectable with errors.Is(err, syscall.ECONNREFUSED)) otherwise, wrapped.
func Dial(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("netns: dial: %q is not a literal ip:port: %w", addr, errdefs.ErrInvalidArgument)
	}
	ip := ap.Addr().Unmap()
	var family int
	var sa unix.Sockaddr
	switch {
	case ip.Is4() && (network == "tcp" || network == "tcp4"):
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ip.As4()}
	case ip.Is6() && (network == "tcp" || network == "tcp6"):
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ip.As16()}
	default:
		return nil, fmt.Errorf("netns: dial: network %q cannot reach %q (want tcp, tcp4 or tcp6 of the address's family): %w", network, addr, errdefs.ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("netns: dial %s in %s: %w", addr, nsPath, err)
	}
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return nil, fmt.Errorf("netns: open namespace %s: %w: %w", nsPath, errdefs.ErrNotFound, err)
	}
	defer ns.Close()
	fd := -1
	err = inNS(ns, func() error {
		var err error
		fd, err = unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("netns: socket in %s: %w", nsPath, err)
	}
	conn, err := connect(ctx, fd, sa)
	if err != nil {
		return nil, fmt.Errorf("netns: dial %s in %s: %w", addr, nsPath, err)
	}
	return conn, nil
}

// connect connects the non-blocking socket fd (which it takes over) to sa, waiting for the
// handshake through the runtime poller, and returns it as a net.Conn.
func connect(ctx context.Context, fd int, sa unix.Sockaddr) (net.Conn, error) {
	err := unix.Connect(fd, sa)
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		unix.Close(fd)
		return nil, err
	}
	// A non-blocking fd given to os.NewFile is registered with the poller.
	f := os.NewFile(uintptr(fd), "netns-socket")
	defer f.Close() // net.FileConn dups the fd
	if err != nil { // EINPROGRESS: wait until the socket is writable, then read its SO_ERROR
		if dl, ok := ctx.Deadline(); ok {
			f.SetWriteDeadline(dl)
		}
		stop := context.AfterFunc(ctx, func() { f.SetWriteDeadline(time.Unix(1, 0)) })
		defer stop()
		rc, err := f.SyscallConn()
		if err != nil {
			return nil, err
		}
		var soErr error
		// Called at once and again whenever the poller reports the socket writable: done when
		// the socket has an error or a peer (a spurious wake-up, or a handshake that finished
		// before the poller saw the socket, is handled by looking, not by counting calls).
		werr := rc.Write(func(fd uintptr) bool {
			v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
			switch {
			case err != nil:
				soErr = err
				return true
			case v != 0:
				soErr = unix.Errno(v)
				return true
			}
			_, err = unix.Getpeername(int(fd))
			return err == nil
		})
		if werr != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			if errors.Is(werr, os.ErrDeadlineExceeded) {
				return nil, context.DeadlineExceeded
			}
			return nil, werr
		}
		if soErr != nil {
			return nil, soErr
		}
		f.SetWriteDeadline(time.Time{})
	}
	return net.FileConn(f)
}
