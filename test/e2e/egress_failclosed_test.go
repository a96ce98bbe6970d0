package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/daemontest"
	"github.com/hutchdev/hutch/internal/egress/egresstest"
)

// failClosedNames are the fail-closed test's hutchd's (its own, since it is killed).
var failClosedNames = egressDaemonNames{tag: "failclosed", ifPrefix: "hsf", nsPrefix: "hutchfc-",
	subnet: "10.84.0.0/16", portBase: 38000, trustUpstream: true}

const (
	fcNSPrefix = "hutchfc-"
	fcTable    = "hutchfailclosed"
)

// failClosedDaemon starts the fail-closed test's own hutchd (egress_harness_test.go) and
// checks at the end that its nftables table went with it.
func failClosedDaemon(t *testing.T, inet *egresstest.Internet) *daemontest.Daemon {
	return egressDaemon(t, inet, failClosedNames, func() {
		if n := nftTableCount(t, failClosedNames.table()); n != 0 {
			t.Errorf("nft table %s left %d times after hutchd stopped", failClosedNames.table(), n)
		}
	})
}

// nftTableCount counts the inet tables called name.
func nftTableCount(t *testing.T, name string) int {
	t.Helper()
	out, err := exec.Command("nft", "list", "tables").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list tables: %v: %s", err, out)
	}
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) == "table inet "+name {
			n++
		}
	}
	return n
}

var nftCounters = regexp.MustCompile(`counter packets \d+ bytes \d+`)

// nftRuleset is the table's ruleset with counter values blanked, for comparison.
func nftRuleset(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("nft", "list", "table", "inet", name).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list table %s: %v: %s", name, err, out)
	}
	return nftCounters.ReplaceAllString(string(out), "counter")
}

// inSandboxNet runs a host command inside the sandbox's network namespace (hutchd is dead, so
// the agent cannot be reached) and returns its output and exit code (-1: did not run).
func inSandboxNet(id string, timeout time.Duration, args ...string) (string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", fcNSPrefix + id}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp"}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return string(out), ee.ExitCode()
	default:
		return fmt.Sprintf("%s (%v)", out, err), -1
	}
}

// dnsProbe sends one A query for name to server:53 over UDP from inside the sandbox's
// namespace and prints "answer" or "none: <why>" (python3 on the host: no dig needed).
const dnsProbe = `
import socket, struct, sys
q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
for l in sys.argv[2].split("."):
    q += bytes([len(l)]) + l.encode()
q += b"\x00" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
try:
    s.connect((sys.argv[1], 53))
    s.send(q)
    r = s.recv(512)
    print("answer", len(r))
except Exception as e:
    print("none:", type(e).__name__)
`

// TestEgressFailClosed is EGRESS.md §8.2 item 14: with hutchd killed (SIGKILL), a running
// sandbox's HTTP, HTTPS, DNS and other TCP towards the outside all fail — the nftables table
// stays and redirects to hutchd's ports, now closed, so nothing is forwarded and nothing
// reaches the fake internet; after hutchd restarts, its table exists exactly once with the
// same rules and the sandbox's egress works again.
func TestEgressFailClosed(t *testing.T) {
	requireEnv(t)
	for _, tool := range []string{"ip", "python3", "curl"} {
		if !have(tool) {
			t.Skipf("needs %s on the host", tool)
		}
	}
	inet := egresstest.NewInternet(t, egresstest.InternetConfig{})
	dm := failClosedDaemon(t, inet)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const id = "failclosed"
	sb, err := dm.Client().Sandbox(ctx, id, nil)
	if err != nil {
		t.Fatalf("sandbox: %v\n%s", err, dm.LogTail())
	}
	if err := sb.WriteFile(ctx, "/tmp/hxnet-ca.pem", inet.CAPEM); err != nil {
		t.Fatal(err)
	}
	egressWorks := func(when string) {
		t.Helper()
		for _, url := range []string{"http://other.example.test/headers", "https://other.example.test/headers"} {
			out := execOK(t, sb, "curl -sS --max-time 20 --cacert /tmp/hxnet-ca.pem "+url)
			if !strings.Contains(out, `"host":"other.example.test"`) {
				t.Fatalf("%s: %s answered %q", when, url, out)
			}
		}
		if out := execOK(t, sb, "getent hosts other.example.test"); !strings.Contains(out, "other.example.test") {
			t.Fatalf("%s: DNS: %q", when, out)
		}
	}
	egressWorks("before the kill")
	if n := nftTableCount(t, fcTable); n != 1 {
		t.Fatalf("table %s exists %d times before the kill", fcTable, n)
	}
	rulesBefore := nftRuleset(t, fcTable)
	gw, code := inSandboxNet(id, 10*time.Second, "sh", "-c", "ip -4 route show default | cut -d' ' -f3")
	gw = strings.TrimSpace(gw)
	if code != 0 || gw == "" {
		t.Fatalf("sandbox gateway: %q %d", gw, code)
	}

	dm.Kill9()
	restarted := false
	t.Cleanup(func() { // runs before failClosedDaemon's: a failure below leaves hutchd dead
		if !restarted {
			dm.Start(context.Background())
		}
	})
	apiBefore := len(inet.APIRequests())
	queriesBefore := len(inet.Queries())
	// curl exit 7 is "failed to connect": the redirect lands on a closed port and the kernel
	// answers RST. Addresses are pinned with --resolve so DNS is not what fails here.
	for _, c := range []struct {
		name string
		args []string
	}{
		{"http", []string{"--resolve", "api.example.test:80:" + egresstest.APIIP, "http://api.example.test/headers"}},
		{"https", []string{"--resolve", "api.example.test:443:" + egresstest.APIIP, "--cacert", inet.CAFile, "https://api.example.test/headers"}},
		{"http by address", []string{"http://" + egresstest.APIIP + "/headers"}},
		{"other port", []string{fmt.Sprintf("telnet://%s:%d", egresstest.APIIP, egresstest.TCPPort)}},
		{"sink", []string{"http://" + egresstest.SinkIP + ":8080/"}},
	} {
		out, code := inSandboxNet(id, 30*time.Second, append([]string{"curl", "-sS", "--max-time", "8", "-o", "/dev/null"}, c.args...)...)
		if code != 7 {
			t.Errorf("%s with hutchd dead: curl exit %d, want 7 (connection refused): %s", c.name, code, out)
		}
		t.Logf("hutchd dead, %s: curl exit %d %s", c.name, code, strings.TrimSpace(out))
	}
	for _, server := range []string{gw, egresstest.DNSIP} {
		out, _ := inSandboxNet(id, 30*time.Second, "python3", "-c", dnsProbe, server, "api.example.test")
		if !strings.HasPrefix(out, "none:") {
			t.Errorf("DNS via %s with hutchd dead: %q", server, out)
		}
		t.Logf("hutchd dead, DNS via %s: %s", server, strings.TrimSpace(out))
	}
	if n := len(inet.APIRequests()) - apiBefore; n != 0 {
		t.Errorf("api received %d requests while hutchd was dead", n)
	}
	if n := len(inet.Queries()) - queriesBefore; n != 0 {
		t.Errorf("the DNS authority received %d queries while hutchd was dead: %v", n, inet.Queries()[queriesBefore:])
	}
	for _, h := range inet.SinkHits() {
		t.Errorf("sink was reached: %+v", h)
	}
	if n := nftTableCount(t, fcTable); n != 1 {
		t.Errorf("table %s exists %d times with hutchd dead", fcTable, n)
	}

	restarted = true
	if err := dm.Start(ctx); err != nil {
		t.Fatalf("restart: %v\n%s", err, dm.LogTail())
	}
	if n := nftTableCount(t, fcTable); n != 1 {
		t.Fatalf("table %s exists %d times after the restart", fcTable, n)
	}
	if after := nftRuleset(t, fcTable); after != rulesBefore {
		t.Errorf("ruleset after the restart differs:\nbefore:\n%s\nafter:\n%s", rulesBefore, after)
	}
	egressWorks("after the restart")
}
