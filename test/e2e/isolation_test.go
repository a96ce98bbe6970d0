package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/testutil"
)

// probe is a python3 snippet run inside a sandbox: it tries a TCP connect and prints OPEN, or
// BLOCKED with the reason. hutchd's other-port listener completes the handshake of TCP to
// ports other than 80/443 and resets refused connections at once, so a reset right after the
// connect counts as BLOCKED.
const probeTCP = `python3 - <<'PY'
import socket, sys
s = socket.socket()
s.settimeout(3)
try:
    s.connect((%q, %d))
    try:
        s.recv(1)
        print("OPEN")
    except ConnectionResetError as e:
        print("BLOCKED", type(e).__name__, e)
    except socket.timeout:
        print("OPEN")
except Exception as e:
    print("BLOCKED", type(e).__name__, e)
PY`

func probe(t *testing.T, sb *client.Sandbox, host string, port int) string {
	t.Helper()
	return strings.TrimSpace(mustExec(t, sb, fmt.Sprintf(probeTCP, host, port)))
}

// hostListener listens on every host address and counts connections.
func hostListener(t *testing.T) (port int, hits *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	hits = &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, hits
}

// TestIsolation tries, from inside a sandbox, what the escape suite (escape_test.go, which
// holds the network reachability attempts) does not cover: UDP, host files, the memory limit
// and the agent socket.
func TestIsolation(t *testing.T) {
	requireEnv(t)
	parallel(t)
	a := sandbox(t, "e2e-iso-a", &client.SandboxOptions{InstanceType: "lite"})
	infoA, err := a.Info(ctxT(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	gateway := gatewayOf(t, infoA.Address)
	t.Run("udp other than dns dropped", func(t *testing.T) {
		got := mustExec(t, a, `python3 -c "
import socket
s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
s.sendto(b'x', ('`+gateway+`', 9999))
try:
    s.recvfrom(10); print('ANSWER')
except Exception as e:
    print('NOANSWER')
"`)
		if strings.TrimSpace(got) != "NOANSWER" {
			t.Fatalf("udp probe = %q", got)
		}
	})
	t.Run("host files invisible", func(t *testing.T) {
		marker := filepath.Join(os.TempDir(), "hutch-e2e-host-secret")
		if err := os.WriteFile(marker, []byte("hutch-marker-4711"), 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(marker)
		out := mustExec(t, a, "cat "+marker+" 2>&1 || true; cat "+filepath.Join(d.StateDir, "token")+" 2>&1 || true")
		if strings.Contains(out, "hutch-marker-4711") || strings.Contains(out, d.Token) {
			t.Fatalf("host files visible in the sandbox: %q", out)
		}
	})
	t.Run("memory limit holds", func(t *testing.T) {
		skipOnGVisor(t, "the Sentry holds all of the sandbox's memory, so the memory cgroup's OOM kill takes the whole sandbox, agent included (docs/SECURITY.md § Containment)")
		res, err := a.Exec(ctxT(t, 2*time.Minute), `python3 -c 'b = bytearray(600 * 2**20); print(len(b))'`, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 137 {
			t.Fatalf("600 MiB in a 256 MiB sandbox: exit %d stdout %q; want 137 (killed)", res.ExitCode, res.Stdout)
		}
		// The sandbox and its agent keep working.
		if got := mustExec(t, a, "echo alive"); got != "alive\n" {
			t.Fatalf("after OOM: %q", got)
		}
	})
	t.Run("agent socket cannot be redirected", func(t *testing.T) {
		// A host unix socket the sandbox tries to point hutchd at.
		sock := filepath.Join(os.TempDir(), "hutch-e2e-evil.sock")
		os.Remove(sock)
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var evil atomic.Int64
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				evil.Add(1)
				c.Close()
			}
		}()
		evilSB := sandbox(t, "e2e-iso-evil", &client.SandboxOptions{InstanceType: "lite"})
		// Plant symlinks to the host socket wherever an agent socket might be looked for.
		mustExec(t, evilSB, "mkdir -p /run/hutch && ln -sf "+sock+" /run/hutch/agent.sock && ln -sf "+sock+" /tmp/agent.sock")
		// Many parallel calls make hutchd dial the agent afresh.
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := evilSB.Exec(ctxT(t, time.Minute), "sleep 0.2; hostname", nil)
				if err != nil || string(res.Stdout) != "e2e-iso-evil\n" {
					failed.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := failed.Load(); n != 0 {
			t.Fatalf("%d of 20 parallel execs failed or ran elsewhere", n)
		}
		if n := evil.Load(); n != 0 {
			t.Fatalf("hutchd followed the sandbox's symlink to a host socket %d times", n)
		}
	})
}

func gatewayOf(t *testing.T, addr string) string {
	t.Helper()
	ip := net.ParseIP(addr).To4()
	if ip == nil {
		t.Fatalf("sandbox address %q is not IPv4", addr)
	}
	ip[3]--
	return ip.String()
}

func mustPort(t *testing.T, hostport string) int {
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatal(err)
	}
	return mustAtoi(p)
}

func mustAtoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

func waitListening(t *testing.T, sb *client.Sandbox, port int) {
	t.Helper()
	if !testutil.Poll(t, 200*time.Millisecond, 20*time.Second, func() bool { return strings.HasPrefix(probe(t, sb, "127.0.0.1", port), "OPEN") }) {
		t.Fatalf("nothing listens on %d in %s", port, sb.ID())
	}
}
