package oom

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/testutil"
)

// fakeProc writes /proc/PID/{statm,oom_score_adj,comm,exe,stat} for pid under root. "shim" is
// the agent's binary started by serverPID; "rogue" the agent's binary started by anyone else.
func fakeProc(t *testing.T, root string, pid int, rssPages, adj int64, comm string, serverPID int) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, ppid := "/usr/bin/"+comm, 1
	switch comm {
	case "shim":
		exe, ppid = agentExe, serverPID
	case "rogue":
		exe = agentExe
	}
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(fmt.Sprintf("%d (a (b) c) S %d %d 0 0\n", pid, ppid, pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, filepath.Join(dir, "exe")); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{
		"statm":         fmt.Sprintf("%d %d 10 1 0 5 0\n", rssPages*2, rssPages),
		"oom_score_adj": fmt.Sprintf("%d\n", adj),
		"comm":          comm + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// agentExe is the agent's binary in these tests (Enforcer.Self).
const agentExe = "/.hutch/hutch-init"

// TestEnforcerChoosesLikeLinux runs the enforcer over a procfs made for the test whose entries
// are real child processes: it must kill the one of highest badness (resident pages plus
// oom_score_adj thousandths of the limit, a negative adjustment counting as 0), never pid 1,
// the agent's server or a shim (the agent's binary, started by its server; another copy of the
// binary is fair game), one at a time, and count the kills.
func TestEnforcerChoosesLikeLinux(t *testing.T) {
	root := t.TempDir()
	page := int64(os.Getpagesize())
	const limit = 100 << 20
	start := func() *exec.Cmd {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	big, adjusted, exempt, shim, negative, rogue := start(), start(), start(), start(), start(), start()
	limitPages := limit / page
	fakeProc(t, root, 1, 10*limitPages, 0, "init", exempt.Process.Pid)                          // pid 1: never
	fakeProc(t, root, big.Process.Pid, limitPages/2, 0, "big", exempt.Process.Pid)              // 0.5 × limit
	fakeProc(t, root, adjusted.Process.Pid, limitPages/10, 500, "adjusted", exempt.Process.Pid) // 0.1 + 0.5
	fakeProc(t, root, exempt.Process.Pid, 5*limitPages, 0, "agent", exempt.Process.Pid)         // the server
	fakeProc(t, root, shim.Process.Pid, 5*limitPages, 500, "shim", exempt.Process.Pid)          // the agent's binary
	// Linux would never choose -1000; here it counts as 0: 0.7 × limit, the highest.
	fakeProc(t, root, negative.Process.Pid, limitPages*7/10, -1000, "negative", exempt.Process.Pid)
	// A copy of the agent's binary that the server did not start: 0.65, the next victim.
	fakeProc(t, root, rogue.Process.Pid, limitPages*65/100, 0, "rogue", exempt.Process.Pid)
	os.MkdirAll(filepath.Join(root, "self"), 0o755) // not a pid
	pressure := filepath.Join(t.TempDir(), "pressure")
	os.WriteFile(pressure, []byte("0\n"), 0o644)
	var over atomic.Bool
	var reads atomic.Int64
	over.Store(true)
	e := &Enforcer{
		Limit: limit, Proc: root, Server: exempt.Process.Pid, Self: agentExe, Pressure: pressure,
		Usage: func() (int64, error) {
			reads.Add(1)
			if over.Load() {
				return limit + 1, nil
			}
			return limit / 2, nil
		},
		FastInterval: time.Millisecond, SlowInterval: time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	// Without pressure the usage is read once, at the start, and nothing is killed.
	time.Sleep(100 * time.Millisecond)
	if n := reads.Load(); n != 1 {
		t.Fatalf("usage read %d times without pressure; want once (the start check)", n)
	}
	werr := make(chan error, 1)
	go func() { werr <- negative.Wait() }()
	os.WriteFile(pressure, []byte("1\n"), 0o644)
	select {
	case err := <-werr:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the negative-adjusted process ended with %v; want SIGKILL", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the enforcer killed nothing")
	}
	// Still over the limit: the rogue copy of the agent's binary goes next.
	os.RemoveAll(filepath.Join(root, strconv.Itoa(negative.Process.Pid)))
	werr = make(chan error, 1)
	go func() { werr <- rogue.Wait() }()
	select {
	case <-werr:
	case <-time.After(30 * time.Second):
		t.Fatal("the rogue copy of the agent's binary was not killed")
	}
	// Its memory is back (the fake procfs entry goes with it): nothing more is killed.
	os.RemoveAll(filepath.Join(root, strconv.Itoa(rogue.Process.Pid)))
	over.Store(false)
	time.Sleep(50 * time.Millisecond)
	for _, c := range []*exec.Cmd{big, adjusted, exempt, shim} {
		if err := c.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("%v was killed too", c.Args)
		}
	}
	if got := e.Kills(); got != 2 {
		t.Errorf("Kills() = %d, want 2", got)
	}
	// The agent's counter reports the kills.
	if n, ok := (Counter{Root: t.TempDir(), Enforcer: e}).Kills(); !ok || n != 2 {
		t.Errorf("Counter with the enforcer: %d, %v; want 2, true", n, ok)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestEnforcerNeedsUsage(t *testing.T) {
	e := &Enforcer{Limit: 1 << 20, Usage: CgroupUsage(t.TempDir())}
	if err := e.Run(context.Background()); err == nil {
		t.Fatal("ran without a readable usage")
	}
	if err := (&Enforcer{}).Run(context.Background()); err == nil {
		t.Fatal("ran without a limit")
	}
}

func TestCgroupUsage(t *testing.T) {
	for _, file := range []string{"memory.current", "memory/memory.usage_in_bytes"} {
		root := t.TempDir()
		os.MkdirAll(filepath.Join(root, "memory"), 0o755)
		os.WriteFile(filepath.Join(root, file), []byte("12345\n"), 0o644)
		if n, err := CgroupUsage(root)(); err != nil || n != 12345 {
			t.Errorf("%s: %d, %v", file, n, err)
		}
	}
}

// TestGuardCounter: a kill of the memory guard (a later time in GuardKillFile) counts like the
// kernel's, alone or with the kernel's counter, also when the file was recreated at 0 (a memory
// wake) between the start and the kill. Its reason follows its cause (GuardCauseFile), unless
// the kernel's counter rose too; no cause file (an older hutchd) is a memory kill.
func TestGuardCounter(t *testing.T) {
	dir := t.TempDir()
	guard := filepath.Join(dir, "last_kill")
	causeFile := filepath.Join(dir, "last_kill_cause")
	for _, tc := range []struct {
		name              string
		kernel            bool
		before, reset, at string
		cause, want       string // cause "-": no cause file
	}{
		{"alone", false, "0", "", "1700000000000000000", "memory", Reason},
		{"with the kernel's counter", true, "0", "", "1700000000000000000", "memory", Reason},
		{"after a second kill", false, "1700000000000000000", "", "1700000000000000001", "memory", Reason},
		{"after a wake", false, "1700000000000000000", "0", "1700000000000000005", "memory", Reason},
		{"no cause file", false, "0", "", "1700000000000000000", "-", Reason},
		{"process limit", false, "0", "", "1700000000000000000", "processes", ReasonProcessLimit},
		{"starved agent", false, "0", "", "1700000000000000000", "starved", ReasonCPUStarved},
		{"starved agent and the kernel's OOM killer", true, "0", "", "1700000000000000000", "starved", Reason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.kernel {
				os.WriteFile(filepath.Join(root, "memory.events"), []byte("oom_kill 4\n"), 0o644)
			}
			os.WriteFile(guard, []byte(tc.before+"\n"), 0o644)
			os.Remove(causeFile)
			w := Counter{Root: root, Guard: guard}.Start()
			if tc.reset != "" {
				os.WriteFile(guard, []byte(tc.reset+"\n"), 0o644)
			}
			if got := w.Reason(137); got != "" {
				t.Fatalf("no kill yet: %q", got)
			}
			if tc.cause != "-" {
				os.WriteFile(causeFile, []byte(tc.cause+"\n"), 0o644)
			}
			if tc.kernel && tc.cause != "memory" { // the OOM killer took it too
				os.WriteFile(filepath.Join(root, "memory.events"), []byte("oom_kill 5\n"), 0o644)
			}
			os.WriteFile(guard, []byte(tc.at+"\n"), 0o644)
			if got := w.Reason(137); got != tc.want {
				t.Fatalf("after a guard kill (cause %s): %q, want %q", tc.cause, got, tc.want)
			}
			if got := w.Reason(0); got != "" {
				t.Fatalf("exit 0 after a guard kill: %q", got)
			}
		})
	}
	// Without the file (runc sandboxes) the guard reports nothing.
	w := Counter{Root: t.TempDir(), Guard: filepath.Join(t.TempDir(), "missing")}.Start()
	if got := w.Reason(137); got != "" {
		t.Fatalf("a missing guard file reported %q", got)
	}
}

// TestEnforcerBacksOffAtASteadyUsage: near the limit, the usage is read often while it grows
// and less and less often while it stays put (a sandbox that runs at its limit must not pay
// for fast reads). The bounds are wide: fast reads every millisecond against back-off from
// 10 ms doubling.
func TestEnforcerBacksOffAtASteadyUsage(t *testing.T) {
	const limit = 100 << 20
	for _, tc := range []struct {
		name    string
		growing bool
	}{{"steady", false}, {"growing", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var reads atomic.Int64
			e := &Enforcer{
				Limit: limit, Proc: t.TempDir(),
				Usage: func() (int64, error) {
					n := reads.Add(1)
					if tc.growing {
						return limit*9/10 + (n%5)*(2<<20), nil // grows 2 MiB a read, stays under the limit
					}
					return limit * 95 / 100, nil
				},
				FastInterval: time.Millisecond, SlowInterval: 10 * time.Millisecond,
			}
			ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
			defer cancel()
			if err := e.Run(ctx); err != nil {
				t.Fatal(err)
			}
			n := reads.Load()
			if !tc.growing && n > 15 {
				t.Errorf("steady usage read %d times in 600 ms; want the back-off (about 7)", n)
			}
			if tc.growing && n < 30 {
				t.Errorf("growing usage read %d times in 600 ms; want fast reads", n)
			}
		})
	}
}

// setGroup rewrites the fake /proc/PID/stat of pid (fakeProc) to put it in process group pgid.
func setGroup(t *testing.T, root string, pid, pgid int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, strconv.Itoa(pid), "stat"), []byte(fmt.Sprintf("%d (x) S 1 %d 0 0\n", pid, pgid)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVictimGroupFirst: the victim is the largest process of the process group whose badness
// adds up to the most: a fork bomb's small processes outweigh a larger innocent process of
// another group (a background command's shell), and a single hog still outweighs a group of
// small ones.
func TestVictimGroupFirst(t *testing.T) {
	const mib = 1 << 20
	page := int64(os.Getpagesize())
	type proc struct {
		pid, pgid int
		rss       int64 // bytes
	}
	for _, c := range []struct {
		name  string
		procs []proc
		want  int
	}{
		{"bomb over a larger shell", []proc{
			{80, 80, 48 * mib / 10}, // bash of a background command
			{100, 100, 35 * mib / 10}, {101, 100, 35 * mib / 10}, {102, 100, 36 * mib / 10}, {103, 100, 35 * mib / 10},
		}, 102},
		{"hog over a group of small ones", []proc{
			{60, 60, 600 * mib}, {61, 60, 2 * mib}, // a shell and its python
			{100, 100, 35 * mib / 10}, {101, 100, 35 * mib / 10}, {102, 100, 35 * mib / 10},
		}, 60},
		{"each its own group: Linux's choice", []proc{{7, 7, 10 * mib}, {8, 8, 30 * mib}, {9, 9, 20 * mib}}, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for _, p := range c.procs {
				fakeProc(t, root, p.pid, p.rss/page, 0, "p", 0)
				setGroup(t, root, p.pid, p.pgid)
			}
			e := &Enforcer{Limit: 256 * mib, Proc: root}
			if v, _, ok := e.victim(); !ok || v.pid != c.want {
				t.Errorf("victim %+v, %v; want pid %d", v, ok, c.want)
			}
		})
	}
}

// TestEnforcerHoldsOffAfterGuardKill: over the limit, the enforcer kills nothing while the
// memory guard's last kill (GuardKill) is less than guardHoldoff ago, and kills once it is
// older.
func TestEnforcerHoldsOffAfterGuardKill(t *testing.T) {
	root := t.TempDir()
	c, werr := startVictim(t)
	const limit = 100 << 20
	fakeProc(t, root, c.Process.Pid, limit/int64(os.Getpagesize())/2, 0, "innocent", 0)
	guard := filepath.Join(t.TempDir(), "last_kill")
	writeKillTime(t, guard, time.Now())
	e := &Enforcer{
		Limit: limit, Proc: root, GuardKill: guard,
		Usage:        func() (int64, error) { return limit + 1, nil },
		FastInterval: time.Millisecond, SlowInterval: time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	select {
	case err := <-werr:
		t.Fatalf("killed (%v) right after the guard's kill", err)
	case <-time.After(500 * time.Millisecond):
	}
	writeKillTime(t, guard, time.Now().Add(-2*guardHoldoff))
	select {
	case <-werr:
	case <-time.After(30 * time.Second):
		t.Fatal("nothing killed once the guard's kill was old")
	}
	// The count follows the signal: the process may be reaped before it is taken.
	testutil.Poll(t, time.Millisecond, 5*time.Second, func() bool { return e.Kills() == 1 })
	if got := e.Kills(); got != 1 {
		t.Errorf("Kills() = %d, want 1", got)
	}
}

// TestEnforcerWaitsForGuardKilled: over the limit after the memory guard's kill is older than
// guardHoldoff, the enforcer still kills nothing while a process that kill signalled
// (GuardKilledFile) has not exited; a zombie of it does not count, nor does a process that
// joined the killed group later. Once it is gone the enforcer waits guardHoldoff more (the
// memory's return), then kills.
func TestEnforcerWaitsForGuardKilled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		killed  string // GuardKilledFile
		waits   bool   // for the dying process
		pgidNow int    // the dying process's group now
	}{
		{"signalled process exiting", "77:77 4001:4000", true, 4000},
		{"a newcomer in the killed group", "4002:4000", false, 4000},
		{"its PID in another group now", "4001:4000", false, 4100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			c, werr := startVictim(t)
			const limit = 100 << 20
			fakeProc(t, root, c.Process.Pid, limit/int64(os.Getpagesize())/2, 0, "innocent", 0)
			// Process 4001, still exiting (state R, its memory already gone from its statm).
			const dying = 4001
			fakeProc(t, root, dying, 0, 0, "bomb", 0)
			setState := func(state string) {
				path := filepath.Join(root, strconv.Itoa(dying), "stat")
				if err := os.WriteFile(path, []byte(fmt.Sprintf("%d (bomb) %s 1 %d 0 0\n", dying, state, tc.pgidNow)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			setState("R")
			dir := t.TempDir()
			guard := filepath.Join(dir, filepath.Base(GuardKillFile))
			writeKillTime(t, guard, time.Now().Add(-2*guardHoldoff))
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(GuardKilledFile)), []byte(tc.killed+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			e := &Enforcer{
				Limit: limit, Proc: root, GuardKill: guard,
				Usage:        func() (int64, error) { return limit + 1, nil },
				FastInterval: time.Millisecond, SlowInterval: time.Millisecond,
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go e.Run(ctx)
			if !tc.waits {
				select {
				case <-werr:
				case <-time.After(30 * time.Second):
					t.Fatal("nothing killed: the enforcer waited for a process the guard did not signal")
				}
				return
			}
			select {
			case err := <-werr:
				t.Fatalf("killed (%v) while the guard's killed process was exiting", err)
			case <-time.After(time.Second):
			}
			setState("Z")
			gone := time.Now()
			select {
			case <-werr:
				if waited := time.Since(gone); waited < guardHoldoff-time.Second {
					t.Errorf("killed %v after the process exited; want guardHoldoff (%v) for its memory to come back", waited, guardHoldoff)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("nothing killed once the guard's killed process had exited")
			}
		})
	}
}

// TestGuardFilesShareADirectory: the enforcer finds GuardKilledFile beside GuardKill.
func TestGuardFilesShareADirectory(t *testing.T) {
	for _, f := range []string{GuardCauseFile, GuardKilledFile, GuardPressureFile} {
		if filepath.Dir(f) != filepath.Dir(GuardKillFile) {
			t.Errorf("%s is not beside %s", f, GuardKillFile)
		}
	}
}

// TestEnforcerSparesWhenKillsCannotHelp: over the limit by more than all the processes it may
// kill hold, within memoryReturn of the guard's kill (memory the killed bomb held that the
// Sentry has not taken back yet), the enforcer kills nothing; once a process holds more than
// the excess, it is killed. Without a recent kill the same excess (memory no process maps:
// SysV shared memory) does not stop it.
func TestEnforcerSparesWhenKillsCannotHelp(t *testing.T) {
	for _, recent := range []bool{true, false} {
		t.Run(map[bool]string{true: "after a kill", false: "no recent kill"}[recent], func(t *testing.T) {
			root := t.TempDir()
			c, werr := startVictim(t)
			const limit = 256 << 20
			pageSize := int64(os.Getpagesize())
			// 5 MiB resident, 33 MiB over the limit.
			fakeProc(t, root, c.Process.Pid, 5<<20/pageSize, 0, "sleep", 0)
			guard := filepath.Join(t.TempDir(), filepath.Base(GuardKillFile))
			at := time.Now().Add(-2 * guardHoldoff)
			if !recent {
				at = time.Now().Add(-2 * memoryReturn)
			}
			writeKillTime(t, guard, at)
			e := &Enforcer{
				Limit: limit, Proc: root, GuardKill: guard,
				Usage:        func() (int64, error) { return limit + 33<<20, nil },
				FastInterval: time.Millisecond, SlowInterval: time.Millisecond,
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go e.Run(ctx)
			if !recent {
				select {
				case <-werr:
				case <-time.After(30 * time.Second):
					t.Fatal("nothing killed over the limit long after any kill")
				}
				return
			}
			select {
			case err := <-werr:
				t.Fatalf("killed (%v) a process holding 5 MiB for an excess of 33 MiB, right after a kill", err)
			case <-time.After(time.Second):
			}
			// It grows past the excess: now it is the memory's holder.
			statm := fmt.Sprintf("%d %d 10 1 0 5 0\n", 80<<20/pageSize, 40<<20/pageSize)
			if err := os.WriteFile(filepath.Join(root, strconv.Itoa(c.Process.Pid), "statm"), []byte(statm), 0o644); err != nil {
				t.Fatal(err)
			}
			select {
			case <-werr:
			case <-time.After(30 * time.Second):
				t.Fatal("nothing killed once the process held more than the excess")
			}
		})
	}
}

// TestGuardKillAhead: a guard kill time far ahead of the enforcer's clock (a clock stepped
// back) does not hold it off.
func TestGuardKillAhead(t *testing.T) {
	guard := filepath.Join(t.TempDir(), filepath.Base(GuardKillFile))
	for _, tc := range []struct {
		ahead time.Duration
		holds bool
	}{{time.Second, true}, {time.Hour, false}} {
		writeKillTime(t, guard, time.Now().Add(tc.ahead))
		e := &Enforcer{Limit: 1, GuardKill: guard, Proc: t.TempDir()}
		if got := e.guardKilling(); got != tc.holds {
			t.Errorf("kill %v ahead: guardKilling() = %v; want %v", tc.ahead, got, tc.holds)
		}
	}
}

// startVictim starts a process for an enforcer to kill; its Wait's result arrives on werr.
func startVictim(t *testing.T) (c *exec.Cmd, werr <-chan error) {
	t.Helper()
	c = exec.Command("sleep", "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill() })
	ch := make(chan error, 1)
	go func() { ch <- c.Wait() }()
	return c, ch
}

// writeKillTime writes at as the guard's last kill time to path, as the guard does.
func writeKillTime(t *testing.T, path string, at time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strconv.FormatInt(at.UnixNano(), 10)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
