package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/testutil"
)

// The code interpreter tests' shared steps (Python, JavaScript and the adversarial cases).

// commCount returns how many processes named comm (as /proc/PID/comm says) run in the sandbox.
func commCount(t *testing.T, sb *client.Sandbox, comm string) int {
	t.Helper()
	res, err := sb.Exec(ctxT(t, time.Minute), `cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^`+comm+`$' || true`, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("count %q: %v", res.Stdout, err)
	}
	return n
}

// runOK runs code on context cid and fails on an error of the run.
func runOK(t *testing.T, sb *client.Sandbox, cid, code string) *client.CodeExecution {
	t.Helper()
	out, err := sb.RunCode(ctxT(t, 2*time.Minute), code, &client.RunCodeOptions{Context: cid})
	if err != nil {
		t.Fatalf("RunCode(%q) = %v", code, err)
	}
	if out.Error != nil {
		t.Fatalf("RunCode(%q) raised %+v", code, out.Error)
	}
	return out
}

// checkStreamed runs code, which prints "tick 0" to "tick 3" with pauses, and checks that the
// lines arrived one by one, not together at the end.
func checkStreamed(t *testing.T, sb *client.Sandbox, cid, code string) {
	t.Helper()
	var times []time.Time
	var text strings.Builder
	for ev, err := range sb.RunCodeStream(ctxT(t, time.Minute), code, &client.RunCodeOptions{Context: cid}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == client.CodeEventStdout {
			text.WriteString(ev.Text)
			if strings.HasSuffix(ev.Text, "\n") {
				times = append(times, time.Now())
			}
		}
		if ev.Type == client.CodeEventError {
			t.Fatalf("error %+v", ev.Error)
		}
	}
	if text.String() != "tick 0\ntick 1\ntick 2\ntick 3\n" || len(times) != 4 {
		t.Fatalf("stdout %q in %d lines", text.String(), len(times))
	}
	if spread := times[3].Sub(times[0]); spread < 800*time.Millisecond {
		t.Fatalf("the lines arrived together (spread %s): output was not streamed", spread)
	}
}

// checkTimeoutKeepsState runs code (an endless loop) with a 1 s timeout, expects a
// TimeoutError, then checks that expr still evaluates to want.
func checkTimeoutKeepsState(t *testing.T, sb *client.Sandbox, cid, code, expr, want string) {
	t.Helper()
	start := time.Now()
	out, err := sb.RunCode(ctxT(t, time.Minute), code, &client.RunCodeOptions{Context: cid, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if out.Error == nil || out.Error.Name != "TimeoutError" {
		t.Fatalf("timeout run %+v", out)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the timeout took %s", d)
	}
	if out := runOK(t, sb, cid, expr); out.Results[0].Text != want {
		t.Fatalf("state lost: %+v", out)
	}
}

// checkInterruptKeepsState starts code (which blocks), interrupts it until it ends with an
// error named errName, then checks that expr still evaluates to want.
func checkInterruptKeepsState(t *testing.T, sb *client.Sandbox, cid, code, errName, expr, want string) {
	t.Helper()
	ctx := ctxT(t, 2*time.Minute)
	done := make(chan *client.CodeExecution, 1)
	go func() {
		out, _ := sb.RunCode(ctx, code, &client.RunCodeOptions{Context: cid})
		done <- out
	}()
	var out *client.CodeExecution
	// No interval: each round waits up to 300 ms for the run to end after its interrupt.
	if !testutil.Poll(t, 0, time.Minute, func() bool {
		if err := sb.InterruptCode(ctx, cid); err != nil {
			t.Fatal(err)
		}
		select {
		case out = <-done:
			return true
		case <-time.After(300 * time.Millisecond):
			return false
		}
	}) {
		t.Fatal("the run was not interrupted")
	}
	if out == nil || out.Error == nil || out.Error.Name != errName {
		t.Fatalf("interrupted run %+v", out)
	}
	if out := runOK(t, sb, cid, expr); out.Results[0].Text != want {
		t.Fatalf("state lost: %+v", out)
	}
}

// checkCyclesLeaveNoProcess runs 20 create/run/delete cycles of lang contexts, each run
// starting `sleep 600` with spawn, and checks that no interpreter (comm) is left behind beyond
// the pool's one pre-started kernel, and no sleep.
func checkCyclesLeaveNoProcess(t *testing.T, sb *client.Sandbox, lang, comm, spawn string) {
	t.Helper()
	ctx := ctxT(t, 10*time.Minute)
	for i := range 20 {
		cc, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{Language: lang})
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		out := runOK(t, sb, cc.ID, spawn+"\n"+strconv.Itoa(i))
		if out.Results[0].Text != strconv.Itoa(i) {
			t.Fatalf("cycle %d: %+v", i, out)
		}
		if err := sb.DeleteCodeContext(ctx, cc.ID); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
	}
	list, err := sb.ListCodeContexts(ctx)
	if err != nil || len(list) != 0 {
		t.Fatalf("contexts left: %+v, %v", list, err)
	}
	var (
		n, sleeps int
		ps        string
	)
	if !testutil.Poll(t, 200*time.Millisecond, 30*time.Second, func() bool {
		n = commCount(t, sb, comm)
		ps = processes(t, sb)
		sleeps = strings.Count(ps, "sleep 600")
		return n <= 1 && sleeps == 0 // the pool keeps one idle interpreter
	}) {
		t.Fatalf("%d %s processes and %d sleeps left:\n%s", n, comm, sleeps, ps)
	}
}
