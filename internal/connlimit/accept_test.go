package connlimit

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// failingListener fails its first Accepts with errs, then returns conns, then net.ErrClosed.
type failingListener struct {
	net.Listener // nil: only Accept is called
	errs         []error
	conns        []net.Conn
	accepts      int
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.accepts++
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		return nil, err
	}
	if len(l.conns) > 0 {
		c := l.conns[0]
		l.conns = l.conns[1:]
		return c, nil
	}
	return nil, net.ErrClosed
}

func (l *failingListener) Close() error { return nil }

// acceptErr is err as net's Accept returns it.
func acceptErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

func TestRetrying(t *testing.T) {
	tests := []struct {
		name string
		errs []error
	}{
		{"out of descriptors", []error{acceptErr(syscall.EMFILE), acceptErr(syscall.EMFILE), acceptErr(syscall.EMFILE)}},
		{"host out of descriptors", []error{acceptErr(syscall.ENFILE)}},
		{"aborted, no buffers, no memory", []error{acceptErr(syscall.ECONNABORTED), acceptErr(syscall.ENOBUFS), acceptErr(syscall.ENOMEM)}},
		{"a protocol error of the new socket", []error{acceptErr(syscall.EPROTO)}},
		{"none", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, peer := net.Pipe()
			defer want.Close()
			defer peer.Close()
			fl := &failingListener{errs: tt.errs, conns: []net.Conn{want}}
			ln := Retrying(fl, "test", nil).(*retrying)
			var slept []time.Duration
			ln.sleep = func(d time.Duration) { slept = append(slept, d) }
			c, err := ln.Accept()
			if err != nil || c != want {
				t.Fatalf("Accept = %v, %v; want the connection after %d errors", c, err, len(tt.errs))
			}
			if len(slept) != len(tt.errs) {
				t.Errorf("slept %d times, want once per error (%d)", len(slept), len(tt.errs))
			}
			for i, d := range slept {
				if w := min(minAcceptBackoff<<i, maxAcceptBackoff); d != w {
					t.Errorf("backoff %d = %s, want %s", i, d, w)
				}
			}
			// Once the listener is closed, Accept fails with net.ErrClosed, at once.
			slept = nil
			if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) || len(slept) != 0 {
				t.Errorf("Accept on a closed listener = %v after %d sleeps, want net.ErrClosed at once", err, len(slept))
			}
		})
	}
}

func TestRetryingBackoffCapped(t *testing.T) {
	var errs []error
	for range 12 {
		errs = append(errs, acceptErr(syscall.EMFILE))
	}
	want, peer := net.Pipe()
	defer want.Close()
	defer peer.Close()
	ln := Retrying(&failingListener{errs: errs, conns: []net.Conn{want}}, "test", nil).(*retrying)
	var slept []time.Duration
	ln.sleep = func(d time.Duration) { slept = append(slept, d) }
	if c, err := ln.Accept(); c != want || err != nil {
		t.Fatalf("Accept = %v, %v", c, err)
	}
	if last := slept[len(slept)-1]; last != maxAcceptBackoff {
		t.Errorf("last backoff %s, want the cap %s", last, maxAcceptBackoff)
	}
}

// TestWrapRetries: a Limiter's listener keeps accepting through EMFILE, as net/http's Serve
// would, but for every error but net.ErrClosed (ENOBUFS stops net/http).
func TestWrapRetries(t *testing.T) {
	srvEnd, peer := net.Pipe()
	defer peer.Close()
	fl := &failingListener{errs: []error{acceptErr(syscall.EMFILE), acceptErr(syscall.ENOBUFS)}, conns: []net.Conn{srvEnd}}
	ln := New("test", Limits{Total: 10}, nil).Wrap(fl)
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("Accept after EMFILE and ENOBUFS: %v", err)
	}
	defer c.Close()
	if lc, ok := c.(*Conn); !ok || lc.NetConn() != srvEnd {
		t.Fatalf("Accept returned %T, want the listener's connection as a *Conn", c)
	}
	if fl.accepts != 3 {
		t.Errorf("%d accepts, want 3", fl.accepts)
	}
}
