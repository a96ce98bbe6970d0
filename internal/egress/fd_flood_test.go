package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/netns"
)

// floodHelperEnv, when set ("addr count"), makes TestFloodHelper the flood of
// TestEgressFDFlood: a process of its own inside a sandbox's namespace, so the flood's
// sockets are not this process's descriptors.
const floodHelperEnv = "HUTCH_TEST_FLOOD"

// TestFloodHelper opens the connections floodHelperEnv asks for, sends nothing on them, prints
// how many it opened and holds them until its stdin closes. Without floodHelperEnv it skips.
func TestFloodHelper(t *testing.T) {
	spec := os.Getenv(floodHelperEnv)
	if spec == "" {
		t.Skip("the flood process of TestEgressFDFlood")
	}
	f := strings.Fields(spec)
	n, _ := strconv.Atoi(f[1])
	var conns []net.Conn
	for i := range n {
		// Addresses of TEST-NET-1: nothing answers there, the firewall redirects port 443 to
		// the proxy.
		c, err := net.DialTimeout("tcp4", fmt.Sprintf("192.0.2.%d:%s", 1+i%200, f[0]), 2*time.Second)
		if err == nil {
			conns = append(conns, c)
		}
	}
	fmt.Printf("opened %d\n", len(conns))
	io.Copy(io.Discard, os.Stdin)
}

// fdsOpen is how many descriptors this process holds.
func fdsOpen() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}

// TestEgressFDFlood: sandboxes hold idle TLS connections through the proxy, more than the
// descriptors the process (hutchd, here the test) has left; the soft RLIMIT_NOFILE is lowered
// for the test, and the proxy's and DNS's caps are derived from it as hutchd derives them
// (internal/daemon, fdBudget: a quarter of the limit for proxied connections, a 64th for DNS
// TCP). During the flood the process stays below its limit; afterwards HTTPS egress from
// another sandbox works: the TLS listener accepts again.
func TestEgressFDFlood(t *testing.T) {
	requirePrivileges(t)
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// Room for the harness (namespaces, nft, upstream servers), then 1,200 descriptors that
	// the flood (2 sandboxes of MaxConnsPerSandbox connections) would exceed without a cap of
	// all sandboxes derived from the limit.
	limit := uint64(fdsOpen() + 300 + 1200)
	budgetProxy, budgetDNS := int(limit/4), int(limit/64)
	up := newUpstreams(t)
	h := newHarness(t, Config{
		Upstreams:     map[string]string{"tls.test": hostPort(up.tls)},
		MaxProxyConns: budgetProxy, MaxDNSTCPConns: budgetDNS,
	})
	flooders := []*netns.Net{h.sandbox("fl1", 1, true), h.sandbox("fl2", 2, true)}
	other := h.sandbox("other", 3, true)
	httpsWorks := func() error {
		body, status, err := curl(other, "-k", "--max-time", "10", "--resolve", "tls.test:443:"+other.Gateway.String(), "https://tls.test/after")
		if err != nil || status != "200" || body != "tls:tls.test/after" {
			return fmt.Errorf("%q %s %v", body, status, err)
		}
		return nil
	}
	if err := httpsWorks(); err != nil {
		t.Fatalf("HTTPS egress before the flood: %v", err)
	}

	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: limit, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
				t.Errorf("restore RLIMIT_NOFILE: %v", err)
			}
		}
	}
	defer restore()

	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			// Listing the descriptors takes one: failing, the process is at its limit.
			n := int64(limit)
			if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
				n = int64(len(ents))
			}
			if n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	// The flood: each flooder opens 1,030 connections (over its own cap of 1,024) and holds
	// them, idle, shorter than the proxy's 10 s ClientHello deadline.
	var stdins []io.WriteCloser
	for _, n := range flooders {
		name := n.NSPath[strings.LastIndex(n.NSPath, "/")+1:]
		cmd := exec.Command("ip", "netns", "exec", name, os.Args[0], "-test.run=^TestFloodHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), floodHelperEnv+"=443 1030")
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stdins = append(stdins, in)
		t.Cleanup(func() { in.Close(); cmd.Wait() })
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatalf("flooder %s: %v", name, err)
		}
		t.Logf("flooder %s: %s", name, strings.TrimSpace(line))
	}
	time.Sleep(time.Second) // the proxy accepts what is queued
	close(stop)
	<-sampled
	t.Logf("descriptors: peak %d during the flood, limit %d (proxy cap %d connections, DNS TCP cap %d)", peak.Load(), limit, budgetProxy, budgetDNS)
	if uint64(peak.Load()) >= limit {
		t.Errorf("the process reached its fd limit during the flood: peak %d of %d", peak.Load(), limit)
	}
	for _, in := range stdins {
		in.Close()
	}
	time.Sleep(time.Second) // the proxy sees the flood's connections closed
	restore()
	if err := httpsWorks(); err != nil {
		t.Errorf("HTTPS egress from another sandbox after the flood: %v", err)
	}
}
