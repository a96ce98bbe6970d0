package e2e

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/runsc"
	hsandbox "github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/testutil"
)

// requireCheckpoint skips unless the runsc on PATH can checkpoint a hutch sandbox (the one
// scripts/host-setup.sh installs can; Debian's cannot).
func requireCheckpoint(t *testing.T) {
	t.Helper()
	path, err := exec.LookPath("runsc")
	if err != nil {
		t.Skip("runsc is not installed (scripts/host-setup.sh)")
	}
	if err := runsc.ProbeCheckpoint(path); err != nil {
		t.Skipf("this runsc cannot checkpoint: %v", err)
	}
}

// TestMemorySnapshot is the memory snapshot scenario on a gVisor sandbox: a Python
// context with a variable, a counter process, a shell session's state, an open terminal and a
// dev server behind a preview URL; the sandbox sleeps with its memory (sleepMode "memory")
// and wakes where it was: the variable is still set, the counter continued from where it
// was, the session keeps its cwd and variables, the terminal's shell is the same (its client
// saw the connection close and reconnects), the server answers through the same URL, and the
// clock inside is the host's. A second sleep and wake work the same; a stop discards the
// memory image, so the next start is fresh.
func TestMemorySnapshot(t *testing.T) {
	requireEnv(t)
	requireCheckpoint(t)
	ctx := ctxT(t, 10*time.Minute)
	sb := sandbox(t, "e2e-memory", &client.SandboxOptions{Runtime: "gvisor"})

	cc, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{Language: client.LanguagePython})
	if err != nil {
		t.Fatal(err)
	}
	runOK(t, sb, cc.ID, "x = 41\nimport os\nkernel_pid = os.getpid()")
	_, err = sb.StartProcess(ctx, "i=0; while :; do i=$((i+1)); echo $i > /tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.1; done", client.ProcessOptions{ID: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	sess := sb.Session("work")
	mustExec(t, sess, "mkdir -p /tmp/deep/dir && cd /tmp/deep/dir && export SESSION_VAR=kept")
	web, err := sb.StartProcess(ctx, "python3 -m http.server 8123 --bind 127.0.0.1 --directory /workspace", client.ProcessOptions{ID: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := web.WaitForPort(ctx, 8123, client.PortWaitOptions{Mode: "http", Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, sb, "echo served-after-wake > /workspace/page.txt")
	ep, err := sb.ExposePort(ctx, 8123, client.ExposeOptions{Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	get := func(when string) {
		t.Helper()
		resp, err := previewHTTP().Get(strings.TrimSuffix(ep.URL, "/") + "/page.txt")
		if err != nil {
			t.Fatalf("%s: GET preview: %v", when, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "served-after-wake\n" {
			t.Fatalf("%s: GET preview = %d %q", when, resp.StatusCode, body)
		}
	}
	get("before sleep")
	term, r := openTerminal(t, sb, "mem1", client.TerminalOptions{Cols: 80, Rows: 24})
	r.send("export TERM_VAR=same-shell; echo ready-$((40+2))\n")
	r.until("ready-42")
	readCounter := func() int {
		t.Helper()
		out := strings.TrimSpace(mustExec(t, sb, "cat /tmp/counter"))
		n, err := strconv.Atoi(out)
		if err != nil {
			t.Fatalf("counter %q", out)
		}
		return n
	}
	time.Sleep(time.Second)
	before := readCounter()

	for cycle := 1; cycle <= 2; cycle++ {
		info, err := sb.Sleep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Status != client.StatusSleeping || info.SleepMode != "memory" || info.SleepNote != "" {
			t.Fatalf("cycle %d: after Sleep: status %q, sleepMode %q, sleepNote %q\nhutchd log:\n%s", cycle, info.Status, info.SleepMode, info.SleepNote, d.LogTail())
		}
		// The terminal's client sees its connection end with the sleep.
		done := make(chan error, 1)
		go func() {
			buf := make([]byte, 4096)
			for {
				if _, err := term.Read(buf); err != nil {
					done <- err
					return
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatalf("cycle %d: the terminal's connection stayed open across the sleep", cycle)
		}
		time.Sleep(2 * time.Second) // asleep for a while: the clock must catch up

		// Waking: the first operation restores the sandbox.
		after := readCounter()
		if after < before {
			t.Fatalf("cycle %d: counter %d after wake, %d before: it started again", cycle, after, before)
		}
		var later int
		if !testutil.Poll(t, 100*time.Millisecond, 30*time.Second, func() bool { later = readCounter(); return later > after }) {
			t.Fatalf("cycle %d: counter %d then %d: the process stopped", cycle, after, later)
		}
		info2, err := sb.Info(ctx)
		if err != nil || info2.Status != "running" || info2.SleepMode != "" {
			t.Fatalf("cycle %d: after wake: %+v, %v", cycle, info2, err)
		}
		out := runOK(t, sb, cc.ID, "x + 1, os.getpid() == kernel_pid")
		if len(out.Results) == 0 || out.Results[0].Text != "(42, True)" {
			t.Fatalf("cycle %d: code context after wake = %+v; want (42, True): the same kernel with its variables", cycle, out.Results)
		}
		if got := mustExec(t, sess, "pwd; echo $SESSION_VAR"); got != "/tmp/deep/dir\nkept\n" {
			t.Fatalf("cycle %d: session after wake = %q", cycle, got)
		}
		procs, err := sb.ListProcesses(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			if (p.ID == "counter" || p.ID == "web") && p.Status != client.ProcessRunning {
				t.Fatalf("cycle %d: process %s is %s after wake", cycle, p.ID, p.Status)
			}
		}
		get("after wake")
		term, r = openTerminal(t, sb, "mem1", client.TerminalOptions{Cols: 80, Rows: 24})
		r.send("echo shell-$TERM_VAR\n")
		r.until("shell-same-shell")
		inside, err := strconv.ParseInt(strings.TrimSpace(mustExec(t, sb, "date +%s")), 10, 64)
		if d := time.Since(time.Unix(inside, 0)); err != nil || d < -3*time.Second || d > 3*time.Second {
			t.Fatalf("cycle %d: clock inside is %v off the host's", cycle, d)
		}
		before = readCounter()
	}

	// Stop discards the memory: the next start is fresh.
	if _, err := sb.Sleep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if out := mustExec(t, sb, "pgrep -f 'counter.new' >/dev/null && echo running || echo gone"); out != "gone\n" {
		t.Fatalf("after stop and start: counter %q; want gone", out)
	}
	if n := readCounter(); n < before {
		t.Fatalf("counter file %d, before the stop %d: the disk lost writes", n, before)
	}
}

// TestGVisorAgentPortAbuse tries to reach a gVisor sandbox's agent, which listens on TCP
// (hsandbox.AgentPort on the sandbox's loopback), from everywhere but hutchd: an exposed port,
// a second sandbox, the host, and a process of the sandbox that tries to take the port.
func TestGVisorAgentPortAbuse(t *testing.T) {
	requireEnv(t)
	if !have("runsc") {
		t.Skip("runsc is not installed (scripts/host-setup.sh)")
	}
	ctx := ctxT(t, 5*time.Minute)
	gv := sandbox(t, "e2e-gv-agentport", &client.SandboxOptions{Runtime: "gvisor"})
	other := sandbox(t, "e2e-gv-agentport-nb", nil)
	info, err := gv.Info(ctx)
	if err != nil || info.Address == "" {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	port := strconv.Itoa(hsandbox.AgentPort)
	// The agent is there, on the sandbox's own loopback.
	if out := mustExec(t, gv, "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:"+port+"/api/ping"); out != "200" {
		t.Fatalf("agent from inside = %q; want 200 (is it on another port?)", out)
	}
	if _, err := gv.ExposePort(ctx, hsandbox.AgentPort, client.ExposeOptions{}); !errdefs.IsCode(err, errdefs.CodeInvalidPort) {
		t.Errorf("expose the agent port = %v; want INVALID_PORT", err)
	}
	// Another sandbox, at the sandbox's address.
	if out := mustExec(t, other, "curl -s -m 5 -o /dev/null -w '%{http_code}' http://"+info.Address+":"+port+"/api/ping || true"); out == "200" {
		t.Errorf("another sandbox reached the agent at %s:%s", info.Address, port)
	}
	// The host, at the sandbox's address.
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(info.Address, port), 3*time.Second); err == nil {
		c.Close()
		t.Errorf("the host connected to the agent at %s:%s", info.Address, port)
	}
	// A process of the sandbox cannot take the address hutchd dials (127.0.0.1, or every
	// address) while the agent holds it, with or without SO_REUSEADDR / SO_REUSEPORT. (The
	// sandbox's own address is another socket address: a server there is never dialled.)
	for _, addr := range []string{"127.0.0.1", "0.0.0.0"} {
		for _, opt := range []string{"", "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); ", "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1); "} {
			res, err := gv.Exec(ctx, `python3 -c "import socket; s = socket.socket(); `+opt+`s.bind(('`+addr+`', `+port+`)); s.listen(1); print('bound')"`, nil)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(res.Stdout), "bound") {
				t.Errorf("a sandbox process bound %s:%s beside the agent (%s)", addr, port, opt)
			}
		}
	}
	if out := mustExec(t, gv, "echo still-answers"); out != "still-answers\n" {
		t.Fatalf("agent after the attempts: %q", out)
	}
}

// TestGVisorForkKeepsRuntime: forks of a gVisor sandbox run on gVisor too (they ran on runc:
// weaker isolation than their source asked for, found by a tester).
func TestGVisorForkKeepsRuntime(t *testing.T) {
	requireEnv(t)
	if !have("runsc") {
		t.Skip("runsc is not installed (scripts/host-setup.sh)")
	}
	ctx := ctxT(t, 5*time.Minute)
	src := sandbox(t, "e2e-gv-forksrc", &client.SandboxOptions{Runtime: "gvisor"})
	mustExec(t, src, "echo from-source > /workspace/f.txt")
	ids := []string{"e2e-gv-fork-1"}
	t.Cleanup(func() { _ = d.Client().SandboxHandle(ids[0]).Destroy(ctxT(t, time.Minute)) })
	res, err := src.Fork(ctx, 1, &client.ForkOptions{IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sandboxes) != 1 || res.Sandboxes[0].Runtime != "gvisor" {
		t.Fatalf("fork = %+v; want one sandbox on gvisor", res.Sandboxes)
	}
	fk := d.Client().SandboxHandle(ids[0])
	host, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	if out := mustExec(t, fk, "cat /workspace/f.txt; uname -r"); !strings.HasPrefix(out, "from-source\n") || strings.Contains(out, strings.TrimSpace(string(host))) {
		t.Fatalf("fork: %q; want the source's file under gVisor's kernel", out)
	}
}

// TestNonRootUserRuns: "/" has the image root's mode on every runtime, so a user other than
// root can run programs (on gVisor, and on runc without user namespaces, "/" was 0700 and
// `su` failed: a tester's finding).
func TestNonRootUserRuns(t *testing.T) {
	requireEnv(t)
	opts := map[string]*client.SandboxOptions{"runc": nil}
	if have("runsc") {
		opts["gvisor"] = &client.SandboxOptions{Runtime: "gvisor"}
	}
	for name, o := range opts {
		t.Run(name, func(t *testing.T) {
			sb := sandbox(t, "e2e-nonroot-"+name, o)
			out := mustExec(t, sb, "stat -c %a /; id -u dave >/dev/null 2>&1 || useradd -m dave; su dave -c 'id -un; echo hi > ~/f && cat ~/f'")
			if out != "755\ndave\nhi\n" {
				t.Fatalf("as a non-root user: %q; want 755, dave, hi", out)
			}
		})
	}
}
