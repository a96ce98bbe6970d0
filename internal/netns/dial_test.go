package netns

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
)

// testNS creates a bare named namespace with lo up and returns its path and handle; both go
// away at the end of the test.
func testNS(t *testing.T, name string) (string, vnetns.NsHandle) {
	t.Helper()
	requireRoot(t)
	if err := ensureRunDir(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(RunDir, name)
	_ = removeNamed(path) // a leftover of a killed run
	if err := createNamed(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := removeNamed(path); err != nil {
			t.Errorf("remove namespace: %v", err)
		}
	})
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	err = inNS(ns, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	if err != nil {
		t.Fatalf("lo up: %v", err)
	}
	return path, ns
}

func TestDial(t *testing.T) {
	path, ns := testNS(t, "hutchnt-dial")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A host listener and a listener inside the namespace on the same 127.0.0.1 port: the
	// host one answers "host", the namespace one echoes. Reaching the echo proves the namespace.
	hostLn, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostLn.Close()
	addr := hostLn.Addr().String()
	go func() {
		for {
			c, err := hostLn.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("host"))
			c.Close()
		}
	}()
	var ln net.Listener
	if err := inNS(ns, func() error {
		var err error
		ln, err = net.Listen("tcp4", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()

	for i := range 3 { // repeated dials: the thread pool is left in a sane state
		c, err := Dial(ctx, path, "tcp", addr)
		if err != nil {
			t.Fatalf("Dial #%d: %v", i, err)
		}
		msg := []byte("hello through the namespace")
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != string(msg) {
			t.Fatalf("echo = %q, %v", got, err)
		}
		c.Close()
	}

	// This goroutine (and so the process's threads) are still in the host namespace.
	cur, err := vnetns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if cur.Equal(ns) {
		t.Fatal("calling thread left in the sandbox namespace")
	}

	// Nothing listens on another port: ECONNREFUSED comes through.
	ln2, err := net.Listen("tcp4", "127.0.0.1:0") // a port known free in the namespace
	if err != nil {
		t.Fatal(err)
	}
	free := ln2.Addr().String()
	ln2.Close()
	if _, err := Dial(ctx, path, "tcp4", free); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Dial to closed port err = %v; want ECONNREFUSED", err)
	}
}

func TestDialErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name, path, network, addr string
		want                      error
	}{
		{"udp", "/nonexistent", "udp", "127.0.0.1:1", errdefs.ErrInvalidArgument},
		{"hostname", "/nonexistent", "tcp", "localhost:80", errdefs.ErrInvalidArgument},
		{"no port", "/nonexistent", "tcp", "127.0.0.1", errdefs.ErrInvalidArgument},
		{"missing namespace", filepath.Join(os.TempDir(), "hutch-no-such-netns"), "tcp", "127.0.0.1:80", errdefs.ErrNotFound},
	}
	for _, tt := range tests {
		if _, err := Dial(ctx, tt.path, tt.network, tt.addr); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v; want %v", tt.name, err, tt.want)
		}
	}
}

// TestDialHangingPinsNoThreads dials, many at once, a port in the namespace whose listener never
// accepts (its backlog fills, so later handshakes hang): the dials end with their context, and
// waiting for them does not hold one OS thread each (a sandbox could otherwise exhaust hutchd's
// threads and file descriptors). A thread held by a dial sits in connect(2); the threads the
// Go runtime starts for the burst and keeps idle (sysmon hands a P on from a slow syscall, more
// often on a loaded host) sit in futex or epoll_wait and are no sign of the fault.
func TestDialHangingPinsNoThreads(t *testing.T) {
	path, ns := testNS(t, "hutchnt-hang")
	var lfd int
	if err := inNS(ns, func() error {
		var err error
		if lfd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0); err != nil {
			return err
		}
		if err := syscall.Bind(lfd, &syscall.SockaddrInet4{Port: 47001, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return err
		}
		return syscall.Listen(lfd, 0)
	}); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(lfd)

	const n = 150
	before := threads(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	errs := make(chan error, n)
	for range n {
		go func() {
			c, err := Dial(ctx, path, "tcp4", "127.0.0.1:47001")
			if c != nil {
				defer c.Close()
				<-ctx.Done() // keep the accepted-by-kernel connections open, so the backlog stays full
			}
			errs <- err
		}()
	}
	time.Sleep(time.Second) // the dials are waiting now
	peak := threads(t)
	inConnect := threadsInSyscall(t, unix.SYS_CONNECT)
	hung := 0
	for range n {
		if err := <-errs; err != nil {
			var ne net.Error
			if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ne) && ne.Timeout()) {
				t.Fatalf("dial: %v; want the context's deadline", err)
			}
			hung++
		}
	}
	if hung == 0 {
		t.Fatal("no dial hung: the test did not fill the backlog")
	}
	if inConnect > 0 {
		t.Fatalf("%d hanging dials held %d OS threads in connect(2) (threads %d → %d); want them waiting in the poller", hung, inConnect, before, peak)
	}
	// One thread per dial would be n more; the runtime's idle threads stay far under that.
	if peak-before >= n {
		t.Fatalf("%d hanging dials took %d more OS threads (%d → %d); want them waiting in the poller", hung, peak-before, before, peak)
	}
}

// threadsInSyscall returns the number of this process's threads that are in system call nr now
// (the first field of /proc/self/task/TID/syscall).
func threadsInSyscall(t *testing.T, nr int) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "syscall"))
		if err != nil {
			continue // the thread ended meanwhile
		}
		if f := strings.Fields(string(b)); len(f) > 0 && f[0] == strconv.Itoa(nr) {
			n++
		}
	}
	return n
}

func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}
