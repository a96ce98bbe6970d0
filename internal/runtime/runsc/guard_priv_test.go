package runsc_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/runsc"
	"github.com/hutchdev/hutch/internal/runtime/runsc/guard"
	"github.com/hutchdev/hutch/internal/testutil"
)

// TestMemoryGuardKillsGroup: a process that takes the Sentry past the guard's trigger, with no
// agent inside to stop it, has its process group killed by the memory guard from the host; the
// sandbox (PID 1) keeps running, the kill's time is in GuardKillFile and its processes in
// KilledFile, and GuardPressureFile said
// "1" while the host count was above the sandbox's limit. "adopted": the guard of
// the runtime that started the sandbox is gone (its hutchd exited) and a new runtime took the
// sandbox over (Adopt), as a restarted hutchd does.
func TestMemoryGuardKillsGroup(t *testing.T) {
	for _, adopted := range []bool{false, true} {
		t.Run(map[bool]string{false: "started", true: "adopted"}[adopted], func(t *testing.T) {
			e := newEnv(t)
			ctx := ctxT(t)
			id := newID(t)
			spec := e.spec(t, id)
			spec.Resources.MemoryBytes = 64 << 20
			if _, err := e.rt.Start(ctx, spec); err != nil {
				t.Fatal(err)
			}
			if adopted {
				e.rt.StopGuard(id)
				rt2, err := runsc.New(runsc.Config{Root: filepath.Join(e.dir, "runsc"), BundleDir: filepath.Join(e.dir, "bundles"), CgroupParent: "hutchrtsc"}, slog.New(slog.DiscardHandler))
				if err != nil {
					t.Fatal(err)
				}
				rt2.Adopt(id)
				t.Cleanup(func() { rt2.StopGuard(id) })
			}
			// 4 MiB every 50 ms, up to 400 MiB: past the trigger (halfway from 64 MiB to
			// guard.SentryMemory(64 MiB, 64), 384 MiB: 224 MiB) slowly enough for the guard to
			// act before the host limit.
			// Meanwhile the guard says "1" in the pressure file once the host count passes the
			// sandbox's 64 MiB.
			pressureFile := filepath.Join(e.dir, "bundles", id, "guard", "pressure")
			sawPressure := make(chan bool, 1)
			stop := make(chan struct{})
			go func() {
				for {
					if b, _ := os.ReadFile(pressureFile); string(b) == "1\n" {
						sawPressure <- true
						return
					}
					select {
					case <-stop:
						sawPressure <- false
						return
					case <-time.After(10 * time.Millisecond):
					}
				}
			}()
			before := time.Now().UnixNano()
			code, out := e.exec(t, id, "python3", "-c", `
import time
held = []
for i in range(100):
    held.append(bytearray(4 << 20))
    time.sleep(0.05)
print("survived")
`)
			close(stop)
			if code != 128+9 || strings.Contains(out, "survived") {
				t.Fatalf("the allocation ended with exit %d, %q; want SIGKILL", code, out)
			}
			if !<-sawPressure {
				t.Error("the pressure file never said 1")
			}
			st, err := e.rt.State(ctx, id)
			if err != nil || st.Status != runtime.StatusRunning {
				t.Fatalf("after the guard's kill: %+v, %v; want the sandbox running", st, err)
			}
			code, out = e.exec(t, id, "cat", guard.KillFile)
			if at, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64); code != 0 || err != nil || at < before || at > time.Now().UnixNano() {
				t.Errorf("guard kill time: exit %d, %q; want the time of the kill", code, out)
			}
			// The killed processes are named, for the agent's enforcer to wait for them.
			code, out = e.exec(t, id, "cat", guard.KilledFile)
			if f := strings.Fields(out); code != 0 || len(f) == 0 {
				t.Errorf("guard killed-processes file: exit %d, %q; want the killed process", code, out)
			} else {
				pid, pgid, _ := strings.Cut(f[0], ":")
				if n, err := strconv.Atoi(pid); err != nil || n <= 1 {
					t.Errorf("guard killed-processes file: %q; want PID:PGID pairs", out)
				} else if m, err := strconv.Atoi(pgid); err != nil || m <= 1 {
					t.Errorf("guard killed-processes file: %q; want PID:PGID pairs", out)
				}
			}
		})
	}
}

// TestMemoryGuardStopsForkBomb: fork bombs in a sandbox of a lite instance's size (62
// millicpu, 256 MiB, 512 pids), with no agent inside, are killed by the memory guard alone
// before the Sentry reaches its host limit: the sandbox keeps running and answers, the host
// cgroup's peak stays under its limit, no process of the bomb is left, and the guard leaves the
// sandbox neither paused nor with its CPU quota raised. PID 1 reaps orphans, as hutch-init
// does. Each bomb runs in a session of its own, as the agent's commands do; the exec's first
// process waits for it.
//   - python: a python bomb, twice in a row: its memory passes the trigger, one group dies.
//   - bash: `:(){ :|:& };:` fills the pids limit with small shells, far under the memory
//     trigger: the guard acts on the host task count (cause "processes").
//   - setsid: every child starts a session of its own, so no group holds half of the
//     processes: the guard kills every group outside PID 1's.
func TestMemoryGuardStopsForkBomb(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bomb   string // python, run by the waiting parent in a child of its own session
		runs   int
		cause  string
		groups int // minimum groups killed
	}{
		{"python", `
while True:
    try:
        os.fork()
    except OSError:
        pass
`, 2, "memory", 1},
		{"bash", `
os.execv("/bin/bash", ["bash", "-c", ":(){ :|:& };:; sleep 600"])
`, 1, "processes", 1},
		{"setsid", `
while True:
    try:
        if os.fork() == 0:
            os.setsid()
    except OSError:
        pass
`, 1, "", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The bombs run side by side: each is held to 62 millicpu, so the host's cores
			// have room, and one after another they took over 5 minutes of CI.
			t.Parallel()
			e := newEnv(t)
			ctx := ctxT(t)
			id, spec, kills := e.liteSpec(t)
			if _, err := e.rt.Start(ctx, spec); err != nil {
				t.Fatal(err)
			}
			memDir := filepath.Join("/sys/fs/cgroup/memory/hutchrtsc", id)
			if _, err := os.Stat(memDir); err != nil {
				t.Skipf("no cgroup v1 memory controller at %s: %v", memDir, err)
			}
			quotaFile := filepath.Join("/sys/fs/cgroup/cpu/hutchrtsc", id, "cpu.cfs_quota_us")
			quota, _ := os.ReadFile(quotaFile)
			hostLimit := readInt(t, filepath.Join(memDir, "memory.limit_in_bytes"))
			for i := range tc.runs {
				if err := os.WriteFile(filepath.Join(memDir, "memory.max_usage_in_bytes"), []byte("0"), 0); err != nil {
					t.Fatal(err)
				}
				started := time.Now()
				code, out := e.exec(t, id, "python3", "-c", `
import os, sys
pid = os.fork()
if pid:
    _, status = os.waitpid(pid, 0)
    sys.exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else 1)
os.setsid()
`+tc.bomb)
				if code != 128+9 {
					t.Fatalf("bomb %d: exit %d, %q; want the bomb's first process SIGKILLed", i, code, out)
				}
				t.Logf("bomb %d: killed after %v", i, time.Since(started).Round(time.Millisecond))
				var k runsc.GuardKill
				select {
				case k = <-kills: // reported after the kill, maybe after the exec ended
				case <-time.After(30 * time.Second):
					t.Fatalf("bomb %d: no guard kill reported (Config.OnGuardKill)", i)
				}
				t.Logf("bomb %d: guard (%s): usage %d MiB, peak %d MiB, trigger %d MiB; pause %v, list %v, resume %v, kill %v (%d groups, %d processes, %d rounds)",
					i, k.Cause, k.Usage>>20, k.Peak>>20, k.Trigger>>20, k.Pause, k.List, k.Resume, k.Kill, k.Groups, k.Processes, k.Rounds)
				if k.ID != id || k.Processes < 2 || k.Groups < tc.groups || k.Rounds < 1 || k.HostLimit <= k.Peak || k.Peak < k.Usage ||
					(tc.cause != "" && k.Cause != tc.cause) || (k.Cause == "memory" && k.Usage <= k.Trigger) {
					t.Errorf("bomb %d: guard kill reported as %+v", i, k)
				}
				st, err := e.rt.State(ctx, id)
				if err != nil || st.Status != runtime.StatusRunning {
					t.Fatalf("bomb %d: after the guard's kill: %+v, %v; want the sandbox running", i, st, err)
				}
				if code, out := e.exec(t, id, "echo", "alive"); code != 0 || out != "alive\n" {
					t.Fatalf("bomb %d: exec after the kill: exit %d, %q", i, code, out)
				}
				if peak := readInt(t, filepath.Join(memDir, "memory.max_usage_in_bytes")); peak >= hostLimit {
					t.Fatalf("bomb %d: host memory peak %d MiB, the host limit", i, peak>>20)
				}
				// The bomb is gone: no process but PID 1 (a later guard pass may be needed).
				var n int
				if !testutil.Poll(t, 200*time.Millisecond, time.Minute, func() bool {
					var err error
					if n, err = e.rt.CountProcesses(ctx, id); err != nil {
						t.Fatal(err)
					}
					return n == 1
				}) {
					t.Fatalf("bomb %d: %d processes a minute after the kill", i, n)
				}
				t.Logf("bomb %d: gone after %v", i, time.Since(started).Round(time.Millisecond))
				// The guard puts the quota back once its kill ended.
				waitQuota(t, quotaFile, quota)
				t.Logf("bomb %d: host memory peak %d MiB of %d MiB", i, readInt(t, filepath.Join(memDir, "memory.max_usage_in_bytes"))>>20, hostLimit>>20)
				// The next bomb is a new attack, not the same one outliving the kill.
				if i < tc.runs-1 {
					time.Sleep(runsc.EscalateWindow)
				}
			}
		})
	}
}

// liteSpec returns a new container ID and its spec of a lite instance's size (62 millicpu,
// 256 MiB, 512 pids) with reaperInit as PID 1, and the channel of its guard's kills.
func (e *env) liteSpec(t *testing.T) (string, runtime.Spec, chan runsc.GuardKill) {
	id := newID(t)
	spec := e.spec(t, id)
	spec.Resources = runtime.Resources{MilliCPU: 62, MemoryBytes: 256 << 20, Pids: 512}
	spec.Args = reaperInit
	kills := make(chan runsc.GuardKill, 8)
	e.rt.SetOnGuardKill(func(k runsc.GuardKill) { kills <- k })
	return id, spec, kills
}

// waitQuota waits up to 30 s for quotaFile to hold quota again (the guard puts back the CPU
// quota it raised once its kill ended).
func waitQuota(t *testing.T, quotaFile string, quota []byte) {
	t.Helper()
	var now []byte
	if !testutil.Poll(t, 50*time.Millisecond, 30*time.Second, func() bool {
		now, _ = os.ReadFile(quotaFile)
		return string(now) == string(quota)
	}) {
		t.Fatalf("CPU quota %q after the guard, want %q", now, quota)
	}
}

// reaperInit is a PID 1 that reaps orphans, as hutch-init does: killed processes reparented to
// it would otherwise stay listed as zombies in their process group.
var reaperInit = []string{"python3", "-c", `
import os, time
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.1)
`}

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSignalGroupWhilePaused: the memory guard's kill through the Sentry's control socket
// reaches a process group of a paused sandbox (which `runsc kill` refuses to signal): the
// sandbox stays paused, and once resumed the group is gone, and a second signal says so; PID 1
// (a reaper, as hutch-init) lives on.
func TestSignalGroupWhilePaused(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	id := newID(t)
	spec := e.spec(t, id)
	spec.Args = reaperInit
	if _, err := e.rt.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if code, out := e.exec(t, id, "sh", "-c", "setsid tail -f /dev/null </dev/null >/dev/null 2>&1 &"); code != 0 {
		t.Fatalf("start the sleeper: exit %d, %q", code, out)
	}
	var pgid int
	if !testutil.Poll(t, 50*time.Millisecond, 10*time.Second, func() bool {
		var err error
		if pgid, err = e.rt.GroupOf(ctx, id, "tail"); err != nil {
			t.Fatalf("the sleeper's group: %d, %v", pgid, err)
		}
		return pgid != 0
	}) {
		t.Fatal("the sleeper's group: none within 10 s")
	}
	if err := e.rt.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.SignalGroup(ctx, id, pgid, unix.SIGKILL); err != nil {
		t.Fatalf("SIGKILL to group %d while paused: %v", pgid, err)
	}
	if st, err := e.rt.State(ctx, id); err != nil || st.Status != runtime.StatusPaused {
		t.Fatalf("after the signal: %+v, %v; want the sandbox still paused", st, err)
	}
	if err := e.rt.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	var g int
	if !testutil.Poll(t, 50*time.Millisecond, 10*time.Second, func() bool {
		var err error
		if g, err = e.rt.GroupOf(ctx, id, "tail"); err != nil {
			t.Fatal(err)
		}
		return g == 0
	}) {
		t.Fatalf("the sleeper (group %d) outlived its SIGKILL", g)
	}
	if err := e.rt.SignalGroup(ctx, id, pgid, unix.SIGKILL); !runsc.IsGroupGone(err) {
		t.Errorf("signal to the dead group = %v, want the group gone", err)
	}
	if st, err := e.rt.State(ctx, id); err != nil || st.Status != runtime.StatusRunning {
		t.Fatalf("after the kill: %+v, %v; want the sandbox running", st, err)
	}
}

// TestGuardStarvedAgent: busy processes that starve the sandbox's agent of CPU, with memory and
// process counts far under the guard's other causes, have their group killed (cause
// "starved"); a few busy processes do not. The agent's probe is an exec of `true` (hutchd pings
// its agent): it needs a task of the sandbox to run, as the agent's answer does, but costs the
// Sentry far more than a ping of the running agent (a new process): in 1/16 of a CPU beside 2
// busy loops, 2 probes in 10 took over 10 s in one CI run and 2 in a row in another, where
// hutchd's ping of a real agent beside 4 loops took 0.3–1.4 s. The few-processes case
// therefore runs in 1/8 of a CPU, still throttled all along.
//   - 2 busy loops in a sandbox of 125 millicpu: the probe runs and answers, no kill in 40 s.
//   - 64 busy loops in a lite-sized sandbox: the guard kills their group; the sandbox runs and
//     answers, and its CPU quota is back.
func TestGuardStarvedAgent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		busy     int
		wait     int   // seconds the busy processes' parent waits before it ends by itself
		milliCPU int64 // 0: lite's
		kills    bool
	}{
		{"a few busy processes", 2, 30, 125, false},
		{"many busy processes", 64, 300, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := ctxT(t)
			id, spec, kills := e.liteSpec(t)
			if tc.milliCPU > 0 {
				spec.Resources.MilliCPU = tc.milliCPU
			}
			probes := make(chan error, 100)
			e.rt.SetAgentProbe(func(ctx context.Context, id string) error {
				_, err := e.rt.Exec(ctx, id, []string{"true"}, nil, nil)
				select {
				case probes <- err:
				default:
				}
				return err
			})
			if _, err := e.rt.Start(ctx, spec); err != nil {
				t.Fatal(err)
			}
			quotaFile := filepath.Join("/sys/fs/cgroup/cpu/hutchrtsc", id, "cpu.cfs_quota_us")
			quota, err := os.ReadFile(quotaFile)
			if err != nil {
				t.Skipf("no cgroup v1 cpu controller: %v", err)
			}
			// The waiting parent's child starts a session, forks the busy processes, which
			// wait for the pipe's end, and then lets them go at once.
			script := `
import os, sys, time
pid = os.fork()
if pid:
    _, status = os.waitpid(pid, 0)
    sys.exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else 1)
os.setsid()
r, w = os.pipe()
for i in range(` + strconv.Itoa(tc.busy) + `):
    if os.fork() == 0:
        os.close(w)
        os.read(r, 1)
        while True:
            pass
os.close(w)
time.sleep(` + strconv.Itoa(tc.wait) + `)
sys.exit(0)
`
			started := time.Now()
			code, out := e.exec(t, id, "python3", "-c", script)
			t.Logf("the busy processes' parent ended after %v with exit %d", time.Since(started).Round(time.Millisecond), code)
			var answered, timedOut int
			for len(probes) > 0 {
				if err := <-probes; err == nil {
					answered++
				} else {
					timedOut++
				}
			}
			t.Logf("agent probes: %d answered, %d failed", answered, timedOut)
			if !tc.kills {
				if answered+timedOut < 2 {
					t.Fatalf("%d probes ran; want 2 or more (the quota was not spent, or the guard never probed)", answered+timedOut)
				}
				if code != 1 {
					t.Fatalf("exit %d, %q; want the parent's child to end by itself (1: no signal)", code, out)
				}
				select {
				case k := <-kills:
					t.Fatalf("the guard killed with %d busy processes: %+v", tc.busy, k)
				default:
				}
				return
			}
			if code != 128+9 {
				t.Fatalf("exit %d, %q; want the busy group SIGKILLed", code, out)
			}
			var k runsc.GuardKill
			select {
			case k = <-kills:
			case <-time.After(30 * time.Second):
				t.Fatal("no guard kill reported (Config.OnGuardKill)")
			}
			t.Logf("guard (%s): %d groups, %d processes, %d rounds; pause %v, list %v, resume %v, kill %v",
				k.Cause, k.Groups, k.Processes, k.Rounds, k.Pause, k.List, k.Resume, k.Kill)
			if k.ID != id || k.Cause != "starved" || k.Groups < 1 || k.Processes < tc.busy || timedOut < 2 {
				t.Errorf("guard kill reported as %+v after %d failed probes; want cause starved, the %d busy processes, 2 probes or more out of time", k, timedOut, tc.busy)
			}
			if st, err := e.rt.State(ctx, id); err != nil || st.Status != runtime.StatusRunning {
				t.Fatalf("after the guard's kill: %+v, %v; want the sandbox running", st, err)
			}
			if code, out := e.exec(t, id, "echo", "alive"); code != 0 || out != "alive\n" {
				t.Fatalf("exec after the kill: exit %d, %q", code, out)
			}
			waitQuota(t, quotaFile, quota)
		})
	}
}
