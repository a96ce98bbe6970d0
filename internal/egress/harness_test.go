package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/netns"
	"github.com/hutchdev/hutch/internal/testutil"
	vnetns "github.com/vishvananda/netns"
)

// Test configuration: never collides with a running hutchd (table "hutch", prefix "hsb",
// 10.88.0.0/16, ports 1500x).
const (
	testTable    = "hutchtest"
	testIfPrefix = "hst"
	testNSPrefix = "hutchtest-"
	testDNSPort  = 25053
	testHTTPPort = 25001
	testTLSPort  = 25002
)

var testSubnet = netip.MustParsePrefix("10.99.0.0/16")

func requirePrivileges(t *testing.T) {
	t.Helper()
	testutil.RequiresRoot(t, "network namespaces, nftables")
	for _, tool := range []string{"nft", "ip", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
}

// harness is a running egress Service plus sandbox namespaces, all removed at test end.
type harness struct {
	t   *testing.T
	mgr *netns.Manager
	svc *Service
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	requirePrivileges(t)
	ctx := context.Background()
	mgr, err := netns.New(netns.Config{IfPrefix: testIfPrefix, NSPrefix: testNSPrefix, Subnet: testSubnet}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Table, cfg.IfPrefix = testTable, testIfPrefix
	cfg.DNSPort, cfg.HTTPPort, cfg.TLSPort = testDNSPort, testHTTPPort, testTLSPort
	svc, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	h := &harness{t: t, mgr: mgr, svc: svc}
	t.Cleanup(func() {
		if err := svc.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if out, err := exec.Command("nft", "list", "tables").Output(); err != nil || strings.Contains(string(out), "inet "+testTable+"\n") {
			t.Errorf("nft table %s still present after Close (%v):\n%s", testTable, err, out)
		}
		ids, _ := mgr.List()
		for _, id := range ids {
			if err := mgr.Teardown(ctx, id); err != nil {
				t.Errorf("Teardown(%s): %v", id, err)
			}
		}
		if ids, err := mgr.List(); err != nil || len(ids) != 0 {
			t.Errorf("namespaces left after teardown: %v %v", ids, err)
		}
		if links, err := mgr.ListLinks(); err != nil || len(links) != 0 {
			t.Errorf("links left after teardown: %v %v", links, err)
		}
	})
	return h
}

// sandbox creates a namespace at index and, if register, adds it to the Service.
func (h *harness) sandbox(id string, index int, register bool) *netns.Net {
	h.t.Helper()
	n, err := h.mgr.Setup(context.Background(), id, index)
	if err != nil {
		h.t.Fatalf("Setup(%s): %v", id, err)
	}
	if register {
		if err := h.svc.AddSandbox(h.t.Context(), id, n.HostIf, n.Gateway, n.Addr); err != nil {
			h.t.Fatalf("AddSandbox(%s): %v", id, err)
		}
	}
	return n
}

// run executes a command inside n's namespace with a clean environment (no proxy variables)
// and returns its combined output and error.
func run(n *netns.Net, args ...string) (string, error) {
	name := n.NSPath[strings.LastIndex(n.NSPath, "/")+1:]
	cmd := exec.Command("ip", append([]string{"netns", "exec", name}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// curl runs curl inside n and returns the body and HTTP status ("000" when no response).
func curl(n *netns.Net, args ...string) (body, status string, err error) {
	base := []string{"curl", "-sS", "--max-time", "20", "-o", "-", "-w", "\n%{http_code}"}
	out, err := run(n, append(base, args...)...)
	i := strings.LastIndex(out, "\n")
	if i < 0 {
		return out, "", err
	}
	return out[:i], strings.TrimSpace(out[i+1:]), err
}

// inNS runs fn on a locked OS thread inside n's namespace; sockets fn creates stay in n and
// may be used from other goroutines afterwards. Failing to enter n marks t failed (Errorf, so
// it may be called from any goroutine) without running fn.
func inNS(t *testing.T, n *netns.Net, fn func()) {
	t.Helper()
	ns, err := vnetns.GetFromPath(n.NSPath)
	if err != nil {
		t.Errorf("open %s: %v", n.NSPath, err)
		return
	}
	defer ns.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer orig.Close()
		if err := vnetns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		fn()
		if err := vnetns.Set(orig); err != nil {
			done <- fmt.Errorf("restore namespace: %w", err) // thread stays locked and dies
			return
		}
		runtime.UnlockOSThread()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Errorf("in namespace %s: %v", n.NSPath, err)
	}
}

// dialFrom dials addr from inside n (TCP) with a bounded wait; dropped packets show as a
// timeout error.
func dialFrom(t *testing.T, n *netns.Net, network, addr string) (net.Conn, error) {
	t.Helper()
	var c net.Conn
	err := errors.New("namespace not entered")
	inNS(t, n, func() { c, err = net.DialTimeout(network, addr, 3*time.Second) })
	return c, err
}
