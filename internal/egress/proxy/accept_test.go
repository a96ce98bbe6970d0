package proxy

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/egress/floor"
)

// failFirst is a listener whose first Accepts fail with errs, as accept(2) does when hutchd
// is out of descriptors or buffers; then it accepts for real.
type failFirst struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (l *failFirst) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// TestAcceptSurvivesErrors: every listener of the proxy keeps accepting after accept fails
// with EMFILE, ENOBUFS or ECONNABORTED, and stops only when closed. The connection accepted
// afterwards is one the proxy refuses (its source is no sandbox), so it is closed at once:
// proof that the loop accepted it.
func TestAcceptSurvivesErrors(t *testing.T) {
	errs := func() []error {
		var out []error
		for _, e := range []syscall.Errno{syscall.EMFILE, syscall.EMFILE, syscall.ENOBUFS, syscall.ECONNABORTED, syscall.EMFILE} {
			out = append(out, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", e)})
		}
		return out
	}
	for _, name := range []string{"tls", "other", "http"} {
		t.Run(name, func(t *testing.T) {
			p, err := New(Config{
				Identify: func(netip.Addr) (string, netip.Addr, bool) { return "", netip.Addr{}, false },
				Floor:    floor.New(),
				Pins:     NewPins(),
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			fl := &failFirst{Listener: ln, errs: errs()}
			start := map[string]func(net.Listener) error{"tls": p.StartTLS, "other": p.StartOther, "http": p.StartHTTP}[name]
			if err := start(fl); err != nil {
				t.Fatal(err)
			}
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(15 * time.Second))
			_, err = c.Read(make([]byte, 1))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the %s listener stopped accepting after the accept errors: the connection was never taken", name)
			}
			closed := make(chan error, 1)
			go func() { closed <- p.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Errorf("Close: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not stop the accept loop")
			}
		})
	}
}
