package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

func TestAddrs(t *testing.T) {
	sub := netip.MustParsePrefix("10.88.0.0/16")
	tests := []struct {
		subnet  netip.Prefix
		index   int
		gw, adr string
		wantErr bool
	}{
		{sub, 0, "10.88.0.1", "10.88.0.2", false},
		{sub, 1, "10.88.0.5", "10.88.0.6", false},
		{sub, 64, "10.88.1.1", "10.88.1.2", false},
		{sub, 16383, "10.88.255.253", "10.88.255.254", false},
		{sub, 16384, "", "", true},
		{sub, -1, "", "", true},
		{netip.MustParsePrefix("10.99.3.7/24"), 2, "10.99.3.9", "10.99.3.10", false},
		{netip.MustParsePrefix("fd00::/64"), 0, "", "", true},
		{netip.MustParsePrefix("10.0.0.0/31"), 0, "", "", true},
	}
	for _, tt := range tests {
		gw, a, err := Addrs(tt.subnet, tt.index)
		if tt.wantErr {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("Addrs(%s, %d) err = %v; want ErrInvalidArgument", tt.subnet, tt.index, err)
			}
			continue
		}
		if err != nil || gw.String() != tt.gw || a.String() != tt.adr {
			t.Errorf("Addrs(%s, %d) = %s, %s, %v; want %s, %s", tt.subnet, tt.index, gw, a, err, tt.gw, tt.adr)
		}
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	testutil.RequiresRoot(t, "network namespaces, veth")
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
}

func testManager(t *testing.T) *Manager {
	t.Helper()
	m, err := New(Config{IfPrefix: "hnt", NSPrefix: "hutchnt-", Subnet: netip.MustParsePrefix("10.98.0.0/16")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func nsExec(t *testing.T, n *Net, args ...string) string {
	t.Helper()
	name := n.NSPath[strings.LastIndex(n.NSPath, "/")+1:]
	out, err := exec.Command("ip", append([]string{"netns", "exec", name}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns exec %s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// reachGateway connects from inside n to a listener on n's gateway address.
func reachGateway(t *testing.T, n *Net) {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(n.Gateway, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	nsExec(t, n, "timeout", "10", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", n.Gateway, port))
}

func TestSetupTeardown(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	m := testManager(t)
	t.Cleanup(func() {
		for _, id := range []string{"nt-a", "nt-b"} {
			if err := m.Teardown(ctx, id); err != nil {
				t.Errorf("cleanup Teardown(%s): %v", id, err)
			}
		}
	})

	n, err := m.Setup(ctx, "nt-a", 3)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	want := Net{ID: "nt-a", Index: 3, NSPath: "/var/run/netns/hutchnt-nt-a", HostIf: "hnt3",
		Gateway: netip.MustParseAddr("10.98.0.13"), Addr: netip.MustParseAddr("10.98.0.14")}
	if *n != want {
		t.Fatalf("Setup = %+v; want %+v", *n, want)
	}
	again, err := m.Setup(ctx, "nt-a", 3)
	if err != nil || *again != want {
		t.Fatalf("Setup again = %+v, %v; want %+v", again, err, want)
	}

	// Inside: address, default route, IPv6 off; the gateway answers.
	if out := nsExec(t, n, "ip", "-4", "-o", "addr", "show", "dev", "eth0"); !strings.Contains(out, "10.98.0.14/30") {
		t.Errorf("eth0 addresses = %q; want 10.98.0.14/30", out)
	}
	if out := nsExec(t, n, "ip", "route", "show", "default"); !strings.Contains(out, "via 10.98.0.13 dev eth0") {
		t.Errorf("default route = %q", out)
	}
	if out := nsExec(t, n, "cat", "/proc/sys/net/ipv6/conf/all/disable_ipv6", "/proc/sys/net/ipv6/conf/eth0/disable_ipv6"); out != "1\n1\n" {
		t.Errorf("inside disable_ipv6 = %q; want 1 1", out)
	}
	if out := nsExec(t, n, "ip", "-6", "-o", "addr"); strings.TrimSpace(out) != "" {
		t.Errorf("inside IPv6 addresses = %q; want none", out)
	}
	reachGateway(t, n)
	if b, _ := os.ReadFile("/proc/sys/net/ipv4/conf/hnt3/rp_filter"); string(b) != "1\n" {
		t.Errorf("host rp_filter = %q; want 1", b)
	}
	if b, _ := os.ReadFile("/proc/sys/net/ipv6/conf/hnt3/disable_ipv6"); len(b) > 0 && string(b) != "1\n" {
		t.Errorf("host disable_ipv6 = %q; want 1", b)
	}

	// Conflicts: another sandbox on the same index; the same sandbox on another index.
	if _, err := m.Setup(ctx, "nt-b", 3); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("Setup(nt-b, 3) err = %v; want ErrConflict", err)
	}
	if _, err := m.Setup(ctx, "nt-a", 4); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("Setup(nt-a, 4) err = %v; want ErrConflict", err)
	}
	if _, err := m.Setup(ctx, "Bad/ID", 5); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Setup(Bad/ID) err = %v; want ErrInvalidArgument", err)
	}
	if _, err := m.Setup(ctx, "nt-b", 5); err != nil {
		t.Fatalf("Setup(nt-b, 5): %v", err)
	}

	ids, err := m.List()
	if err != nil || !slices.Equal(ids, []string{"nt-a", "nt-b"}) {
		t.Errorf("List = %v, %v; want [nt-a nt-b]", ids, err)
	}
	links, err := m.ListLinks()
	if err != nil || !slices.Equal(links, []string{"hnt3", "hnt5"}) {
		t.Errorf("ListLinks = %v, %v; want [hnt3 hnt5]", links, err)
	}

	// Repair: deleting the host veth and re-running Setup rebuilds the pair.
	if out, err := exec.Command("ip", "link", "del", "hnt3").CombinedOutput(); err != nil {
		t.Fatalf("ip link del: %v %s", err, out)
	}
	if _, err := m.Setup(ctx, "nt-a", 3); err != nil {
		t.Fatalf("Setup after link loss: %v", err)
	}
	reachGateway(t, n)

	for _, id := range []string{"nt-a", "nt-b"} {
		if err := m.Teardown(ctx, id); err != nil {
			t.Fatalf("Teardown(%s): %v", id, err)
		}
		if err := m.Teardown(ctx, id); err != nil {
			t.Fatalf("Teardown(%s) again: %v", id, err)
		}
	}
	if ids, err := m.List(); err != nil || len(ids) != 0 {
		t.Errorf("List after teardown = %v, %v; want none", ids, err)
	}
	if links, err := m.ListLinks(); err != nil || len(links) != 0 {
		t.Errorf("ListLinks after teardown = %v, %v; want none", links, err)
	}
	if _, err := os.Stat("/var/run/netns/hutchnt-nt-a"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("namespace file still present: %v", err)
	}
}
