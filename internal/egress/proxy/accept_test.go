package proxy

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/egress/blocked"
	"github.com/hutchdev/hutch/internal/testutil"
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
				Floor:    blocked.New(),
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

// TestAcceptSurvivesRealEMFILE: the process really runs out of descriptors (its soft
// RLIMIT_NOFILE lowered, the rest taken) while a connection waits in the TLS listener's
// queue; once descriptors are free again the listener takes it (and closes it: its source is
// no sandbox).
func TestAcceptSurvivesRealEMFILE(t *testing.T) {
	var logs syncBuffer
	p, err := New(Config{
		Identify: func(netip.Addr) (string, netip.Addr, bool) { return "", netip.Addr{}, false },
		Floor:    blocked.New(),
	}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.StartTLS(ln); err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir("/proc/self/fd")
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: uint64(len(ents) + 32), Max: old.Max}); err != nil {
		t.Skipf("lower RLIMIT_NOFILE: %v", err)
	}
	var fill []*os.File
	release := func() {
		for _, f := range fill {
			f.Close()
		}
		fill = nil
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	}
	defer release()
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		fill = append(fill, f)
	}
	// One descriptor for the client's socket; the proxy's accept then has none.
	fill[len(fill)-1].Close()
	fill = fill[:len(fill)-1]
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial with the last descriptor: %v", err)
	}
	defer c.Close()
	if !testutil.Poll(t, 10*time.Millisecond, 5*time.Second, func() bool { return strings.Contains(logs.String(), "too many open files") }) {
		t.Fatalf("accept never failed with EMFILE; log:\n%s", logs.String())
	}
	release()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the TLS listener never accepted again after EMFILE; log:\n%s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's and the test's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
