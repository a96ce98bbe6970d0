package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

// Sleep and wake, end to end (issue 4): acceptance cases L1 and L2 with a short sleepAfter,
// what counts as activity (preview traffic, open streams and long waits), keepAlive, sessions
// and preview URLs across a sleep, the explicit API and CLI, and kill -9 of hutchd during a
// sleep. Time bounds here only detect hangs; the one timing assertion is a lower bound implied
// by the rules (a sandbox cannot sleep before sleepAfter has passed since its last activity).

// waitStatus polls the sandbox's record until its status is want (bounded) and returns the
// record and when the status was first seen.
func waitStatus(t *testing.T, sb *client.Sandbox, want client.SandboxStatus, bound time.Duration) (*client.SandboxInfo, time.Time) {
	t.Helper()
	var (
		info *client.SandboxInfo
		seen time.Time
	)
	if !testutil.Poll(t, 100*time.Millisecond, bound, func() bool {
		var err error
		if info, err = sb.Info(ctxT(t, time.Minute)); err != nil {
			t.Fatal(err)
		}
		seen = time.Now()
		return info.Status == want
	}) {
		t.Fatalf("sandbox %s: status %s after %s; want %s\nhutchd log:\n%s", sb.ID(), info.Status, bound, want, d.LogTail())
	}
	return info, seen
}

// assertAsleep checks that nothing of a sleeping sandbox runs: no container, network namespace
// or rootfs mount; only its disk remains.
func assertAsleep(t *testing.T, id string) {
	t.Helper()
	if _, ok := runcContainers(t)[id]; ok {
		t.Errorf("sleeping %s still has a container", id)
	}
	if _, err := os.Stat("/var/run/netns/" + nsPrefix + id); err == nil {
		t.Errorf("sleeping %s still has its network namespace", id)
	}
	for _, m := range mountsUnder(filepath.Join(d.StateDir, "data", "sandboxes", id)) {
		t.Errorf("sleeping %s still has mount %s", id, m)
	}
	for _, cg := range scanLeftovers(t).cgroups {
		if filepath.Base(cg) == id {
			t.Errorf("sleeping %s still has cgroup %s", id, cg)
		}
	}
	if _, err := os.Stat(filepath.Join(d.StateDir, "data", "sandboxes", id, "disk.img")); err != nil {
		t.Errorf("sleeping %s lost its disk: %v", id, err)
	}
}

// TestLifecycleL1 is acceptance case L1 with sleepAfter 3 s: preview traffic every second keeps
// the sandbox awake; without traffic it sleeps (not before sleepAfter); the next preview request
// wakes it with its files intact, and its preview URL routes again once its server runs.
func TestLifecycleL1(t *testing.T) {
	requireEnv(t)
	const sleepAfter = 3 * time.Second
	sb := sandbox(t, "e2e-sleep-l1", &client.SandboxOptions{InstanceType: "lite", SleepAfter: sleepAfter})
	ctx := ctxT(t, 10*time.Minute)
	info, err := sb.Info(ctx)
	if err != nil || info.SleepAfter != "3s" || info.KeepAlive {
		t.Fatalf("Info = %+v, %v; want sleepAfter 3s, keepAlive false", info, err)
	}
	mustExec(t, sb, "echo intact > /workspace/l1.txt")
	startTarget(t, sb, "target", "127.0.0.1:8080")
	ep, err := sb.ExposePort(ctx, 8080, client.ExposeOptions{Token: "l1_token"})
	if err != nil {
		t.Fatal(err)
	}
	started, err := sb.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hc := previewHTTP()
	var last time.Time
	for i := range 9 { // about 8 s of traffic, well past sleepAfter
		last = time.Now()
		if st := status(t, hc, ep.URL); st != 200 {
			t.Fatalf("preview request %d: %d; want 200", i, st)
		}
		time.Sleep(time.Second)
	}
	now, err := sb.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if now.Status != client.StatusRunning || !now.StartedAt.Equal(started.StartedAt) {
		t.Fatalf("after 8 s of preview traffic: status %s, started %v (was %v); want running, never restarted\nhutchd log:\n%s",
			now.Status, now.StartedAt, started.StartedAt, d.LogTail())
	}
	_, seen := waitStatus(t, sb, client.StatusSleeping, 2*time.Minute)
	if seen.Sub(last) < sleepAfter {
		t.Fatalf("slept %s after the last preview request; sleepAfter is %s", seen.Sub(last), sleepAfter)
	}
	assertAsleep(t, sb.ID())
	if list, err := d.Client().ListSandboxes(ctx); err != nil || !slices.ContainsFunc(list, func(s client.SandboxInfo) bool {
		return s.ID == sb.ID() && s.Status == client.StatusSleeping
	}) {
		t.Fatalf("ListSandboxes = %+v, %v; want %s sleeping", list, err, sb.ID())
	}

	// The next preview request wakes it. Its server was stopped with it, so nothing answers
	// on the port yet (502), but the sandbox runs again with its files.
	if st := status(t, hc, ep.URL); st != http.StatusBadGateway {
		t.Fatalf("first preview request after sleep: %d; want 502 (woken, server not running)", st)
	}
	woke, err := sb.Info(ctx)
	if err != nil || woke.Status != client.StatusRunning || !woke.StartedAt.After(started.StartedAt) {
		t.Fatalf("after the waking request: %+v, %v; want running with a new start time", woke, err)
	}
	if got := mustExec(t, sb, "cat /workspace/l1.txt"); got != "intact\n" {
		t.Fatalf("file after wake = %q", got)
	}
	// The exposed port routes again (same URL, same token) once a server listens.
	startTarget(t, sb, "target2", "127.0.0.1:8080")
	if st := status(t, hc, ep.URL); st != 200 {
		t.Fatalf("preview URL after wake: %d; want 200", st)
	}
}

// TestLifecycleL2 is acceptance case L2: 100 files written without fsync survive the idle
// sleep with the right checksums.
func TestLifecycleL2(t *testing.T) {
	requireEnv(t)
	sb := sandbox(t, "e2e-sleep-l2", &client.SandboxOptions{InstanceType: "lite", SleepAfter: 2 * time.Second})
	before := mustExec(t, sb, `mkdir -p /workspace/l2 && cd /workspace/l2 &&
		for i in $(seq 1 100); do head -c $((RANDOM * 8 + i)) /dev/urandom > f$i; done &&
		sha256sum f* | sort`)
	if n := strings.Count(before, "\n"); n != 100 {
		t.Fatalf("%d checksums before sleep; want 100", n)
	}
	waitStatus(t, sb, client.StatusSleeping, 2*time.Minute)
	assertAsleep(t, sb.ID())
	after := mustExec(t, sb, "cd /workspace/l2 && sha256sum f* | sort")
	if after != before {
		t.Fatalf("checksums changed across sleep:\nbefore %q\nafter  %q", before, after)
	}
}

// TestSleepHeldByOpenRequests: requests in flight (a long exec, a long wait-exit, a log
// stream) keep the sandbox awake past its sleepAfter; once they end it sleeps.
func TestSleepHeldByOpenRequests(t *testing.T) {
	requireEnv(t)
	const sleepAfter = 2 * time.Second
	sb := sandbox(t, "e2e-sleep-held", &client.SandboxOptions{InstanceType: "lite", SleepAfter: sleepAfter})
	ctx := ctxT(t, 5*time.Minute)
	started, err := sb.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A foreground command that runs for 3 × sleepAfter.
	if out := mustExec(t, sb, "sleep 6; echo done"); out != "done\n" {
		t.Fatalf("long exec = %q", out)
	}
	// A background process and a wait for its exit: only the wait is in flight.
	p, err := sb.StartProcess(ctx, "sleep 6; echo finished", client.ProcessOptions{ID: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := p.WaitForExit(ctx, time.Minute)
	if err != nil || ex.ExitCode != 0 || ex.Status != client.ProcessCompleted {
		t.Fatalf("WaitForExit = %+v, %v; want completed with 0 (a sleep would have killed it)", ex, err)
	}
	// A log stream of a process that prints for 6 s.
	p, err = sb.StartProcess(ctx, "for i in 1 2 3 4 5 6; do echo tick $i; sleep 1; done", client.ProcessOptions{ID: "ticker"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ex, err = p.StreamLogsTo(ctx, client.LogOffsets{}, &out, nil, nil)
	if err != nil || ex.ExitCode != 0 || !strings.Contains(out.String(), "tick 6") {
		t.Fatalf("log stream = %q, %+v, %v; want all six ticks and exit 0", out.String(), ex, err)
	}
	now, err := sb.Info(ctx)
	if err != nil || now.Status != client.StatusRunning || !now.StartedAt.Equal(started.StartedAt) {
		t.Fatalf("after the open requests: %+v, %v; want running, never restarted\nhutchd log:\n%s", now, err, d.LogTail())
	}
	waitStatus(t, sb, client.StatusSleeping, 2*time.Minute)
}

// TestSleepKeepAlive: a keepAlive sandbox never sleeps; switching keepAlive off re-arms the
// idle timer from the change.
func TestSleepKeepAlive(t *testing.T) {
	requireEnv(t)
	const sleepAfter = time.Second
	sb := sandbox(t, "e2e-sleep-keep", &client.SandboxOptions{InstanceType: "lite", SleepAfter: sleepAfter, KeepAlive: true})
	ctx := ctxT(t, 5*time.Minute)
	started, err := sb.Info(ctx)
	if err != nil || !started.KeepAlive || started.SleepAfter != "1s" {
		t.Fatalf("Info = %+v, %v; want keepAlive, sleepAfter 1s", started, err)
	}
	time.Sleep(5 * sleepAfter)
	now, err := sb.Info(ctx)
	if err != nil || now.Status != client.StatusRunning || !now.StartedAt.Equal(started.StartedAt) {
		t.Fatalf("keepAlive sandbox after 5 × sleepAfter idle: %+v, %v; want running", now, err)
	}
	off := false
	changed := time.Now()
	info, err := sb.Update(ctx, client.SandboxUpdate{KeepAlive: &off})
	if err != nil || info.KeepAlive || info.Status != client.StatusRunning {
		t.Fatalf("Update(keepAlive false) = %+v, %v", info, err)
	}
	_, seen := waitStatus(t, sb, client.StatusSleeping, 2*time.Minute)
	if seen.Sub(changed) < sleepAfter {
		t.Fatalf("slept %s after keepAlive was switched off; sleepAfter is %s (the change must re-arm the timer)", seen.Sub(changed), sleepAfter)
	}
	// Settings change on a sleeping sandbox without waking it; a bad value is refused.
	longer := time.Hour
	info, err = sb.Update(ctx, client.SandboxUpdate{SleepAfter: &longer})
	if err != nil || info.SleepAfter != "1h" || info.Status != client.StatusSleeping {
		t.Fatalf("Update(sleepAfter 1h) on a sleeping sandbox = %+v, %v; want 1h, still sleeping", info, err)
	}
	tooShort := 10 * time.Millisecond
	if _, err := sb.Update(ctx, client.SandboxUpdate{SleepAfter: &tooShort}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("Update(sleepAfter 10ms) = %v; want VALIDATION_FAILED", err)
	}
}

// TestSleepSessionsAndExplicitAPI: explicit sleep and wake (idempotent), a named session's cwd
// and exported variables across the sleep, and the CLI commands.
func TestSleepSessionsAndExplicitAPI(t *testing.T) {
	requireEnv(t)
	sb := sandbox(t, "e2e-sleep-api", &client.SandboxOptions{InstanceType: "lite"})
	ctx := ctxT(t, 5*time.Minute)
	info, err := sb.Info(ctx)
	if err != nil || info.SleepAfter != "10m" || info.KeepAlive {
		t.Fatalf("default settings: %+v, %v; want sleepAfter 10m", info, err)
	}
	sess, err := sb.CreateSession(ctx, &client.SessionOptions{ID: "dev", Env: map[string]string{"FROM_CREATE": "c"}})
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, sess, "mkdir -p /workspace/proj && cd /workspace/proj && export TOKEN='a b' && unset LANG")
	mustExec(t, sb, "cd /tmp")
	for range 2 {
		info, err := sb.Sleep(ctx)
		if err != nil || info.Status != client.StatusSleeping {
			t.Fatalf("Sleep = %+v, %v; want sleeping", info, err)
		}
	}
	assertAsleep(t, sb.ID())
	info, err = sb.Wake(ctx)
	if err != nil || info.Status != client.StatusRunning {
		t.Fatalf("Wake = %+v, %v; want running", info, err)
	}
	if info, err = sb.Wake(ctx); err != nil || info.Status != client.StatusRunning {
		t.Fatalf("second Wake = %+v, %v", info, err)
	}
	if got := mustExec(t, sess, `pwd; echo "$TOKEN|${LANG-unset}|$FROM_CREATE"`); got != "/workspace/proj\na b|unset|c\n" {
		t.Fatalf("session dev after sleep: %q", got)
	}
	if got := mustExec(t, sb, "pwd"); got != "/tmp\n" {
		t.Fatalf("default session after sleep: %q", got)
	}
	list, err := sb.ListSessions(ctx)
	if err != nil || !slices.ContainsFunc(list, func(s client.SessionInfo) bool { return s.ID == "dev" && s.Cwd == "/workspace/proj" }) {
		t.Fatalf("ListSessions = %+v, %v", list, err)
	}

	// The CLI.
	hutch := func(args ...string) (string, string, int) {
		cmd := exec.CommandContext(ctx, filepath.Join(bins, "hutch"), args...)
		cmd.Env = append(os.Environ(), "HUTCH_URL="+d.URL(), "HUTCH_TOKEN="+d.Token)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	const cli = "e2e-sleep-cli"
	t.Cleanup(func() { d.Client().SandboxHandle(cli).Destroy(ctxT(t, time.Minute)) })
	if o, e, code := hutch("create", cli, "--instance-type", "lite", "--sleep-after", "30s", "--keep-alive"); code != 0 || !strings.Contains(o, "created") {
		t.Fatalf("hutch create = %q exit %d: %s", o, code, e)
	}
	if o, e, code := hutch("status", cli); code != 0 || !strings.Contains(o, "never (keep-alive)") || !strings.Contains(o, "running") {
		t.Fatalf("hutch status = %q exit %d: %s", o, code, e)
	}
	if o, e, code := hutch("set", cli, "--sleep-after", "45s", "--keep-alive=false"); code != 0 || o != cli+" running sleep-after=45s keep-alive=false snapshot-on-sleep=false\n" {
		t.Fatalf("hutch set = %q exit %d: %s", o, code, e)
	}
	if _, e, code := hutch("set", cli); code != 2 {
		t.Fatalf("hutch set without flags: exit %d (%s); want 2", code, e)
	}
	if _, e, code := hutch("set", cli, "--sleep-after", "0s"); code != 1 || !strings.Contains(e, "VALIDATION_FAILED") {
		t.Fatalf("hutch set --sleep-after 0s: exit %d stderr %q; want VALIDATION_FAILED", code, e)
	}
	if o, e, code := hutch("sleep", cli); code != 0 || o != cli+" sleeping\n" {
		t.Fatalf("hutch sleep = %q exit %d: %s", o, code, e)
	}
	if o, _, code := hutch("list"); code != 0 || !regexpLine(o, cli, "sleeping", "45s") {
		t.Fatalf("hutch list = %q exit %d; want %s sleeping 45s", o, code, cli)
	}
	if o, e, code := hutch("wake", cli); code != 0 || o != cli+" running\n" {
		t.Fatalf("hutch wake = %q exit %d: %s", o, code, e)
	}
}

// regexpLine reports whether some line of out contains all of words, in order.
func regexpLine(out string, words ...string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		rest, ok := line, true
		for _, w := range words {
			i := strings.Index(rest, w)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(w):]
		}
		if ok {
			return true
		}
	}
	return false
}

// TestSleepKill9 kills hutchd with SIGKILL while a sandbox is going to sleep (held in stopping
// by a process that ignores SIGTERM), restarts it, and checks that the sandbox is consistently
// asleep (nothing of it half torn down) with its sleep snapshot taken, that the sleep can be
// asked again, and that it wakes with its files.
func TestSleepKill9(t *testing.T) {
	requireEnv(t)
	sb := sandbox(t, "e2e-sleep-kill9", &client.SandboxOptions{InstanceType: "lite", SnapshotOnSleep: true})
	ctx := ctxT(t, 10*time.Minute)
	mustExec(t, sb, "echo before-crash > /workspace/k.txt")
	// Ignoring SIGTERM (inherited through exec) makes the agent wait its grace period.
	if _, err := sb.StartProcess(ctx, "trap '' TERM; exec sleep 1000", client.ProcessOptions{ID: "stubborn"}); err != nil {
		t.Fatal(err)
	}
	sleepDone := make(chan error, 1)
	go func() {
		_, err := sb.Sleep(context.Background())
		sleepDone <- err
	}()
	waitStatus(t, sb, client.StatusStopping, time.Minute)
	d.Kill9()
	if err := <-sleepDone; err == nil {
		t.Log("the sleep finished before hutchd was killed")
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	sb = d.Client().SandboxHandle(sb.ID())
	info, err := sb.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	switch info.Status {
	case client.StatusSleeping:
		assertAsleep(t, sb.ID())
		// The sleep was finished by the restart; it still took its snapshot.
		if info.LastSnapshot == "" {
			t.Errorf("no sleep snapshot after a sleep cut short: %+v", info)
		}
	case client.StatusRunning:
		if _, ok := runcContainers(t)[sb.ID()]; !ok {
			t.Fatalf("recorded running but no container")
		}
	default:
		t.Fatalf("after kill -9 during sleep and restart: status %s; want sleeping or running\nhutchd log:\n%s", info.Status, d.LogTail())
	}
	// The sleep can be asked again, and the sandbox wakes with its files.
	if info, err := sb.Sleep(ctx); err != nil || info.Status != client.StatusSleeping {
		t.Fatalf("Sleep after restart = %+v, %v", info, err)
	}
	assertAsleep(t, sb.ID())
	if got := mustExec(t, sb, "cat /workspace/k.txt"); got != "before-crash\n" {
		t.Fatalf("file after crash, sleep and wake = %q", got)
	}
	// The interrupted process was recorded as ended, not left running.
	p, err := sb.GetProcess(ctx, "stubborn")
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Info().Status; !st.Done() {
		t.Fatalf("process stubborn after sleep: %s; want ended", st)
	}
}
