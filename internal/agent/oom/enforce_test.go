package oom

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fakeProc writes /proc/PID/{statm,oom_score_adj,comm} for pid under root.
func fakeProc(t *testing.T, root string, pid int, rssPages, adj int64, comm string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
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

// TestEnforcerChoosesLikeLinux runs the enforcer over a procfs made for the test whose entries
// are real child processes: it must kill the one of highest badness (resident pages plus
// oom_score_adj thousandths of the limit), and only that one, and count the kill.
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
	big, adjusted, exempt, protected := start(), start(), start(), start()
	limitPages := limit / page
	fakeProc(t, root, 1, 10*limitPages, 0, "init")                          // pid 1: never
	fakeProc(t, root, big.Process.Pid, limitPages/2, 0, "big")              // 0.5 × limit
	fakeProc(t, root, adjusted.Process.Pid, limitPages/10, 500, "adjusted") // 0.1 + 0.5
	fakeProc(t, root, exempt.Process.Pid, 5*limitPages, 0, "agent")         // Exempt
	fakeProc(t, root, protected.Process.Pid, 5*limitPages, -1000, "protected")
	os.MkdirAll(filepath.Join(root, "self"), 0o755) // not a pid
	var over atomic.Bool
	over.Store(true)
	e := &Enforcer{
		Limit: limit, Proc: root, Exempt: []int{exempt.Process.Pid},
		Usage: func() (int64, error) {
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
	werr := make(chan error, 1)
	go func() { werr <- adjusted.Wait() }()
	select {
	case err := <-werr:
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the adjusted process ended with %v; want SIGKILL", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the enforcer killed nothing")
	}
	// Its memory is back (the fake procfs entry goes with it): nothing more is killed.
	os.RemoveAll(filepath.Join(root, strconv.Itoa(adjusted.Process.Pid)))
	over.Store(false)
	time.Sleep(50 * time.Millisecond)
	for _, c := range []*exec.Cmd{big, exempt, protected} {
		if err := c.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("%v was killed too", c.Args)
		}
	}
	if got := e.Kills(); got != 1 {
		t.Errorf("Kills() = %d, want 1", got)
	}
	// The agent's counter reports the kill.
	if n, ok := (Counter{Root: t.TempDir(), Enforcer: e}).Kills(); !ok || n != 1 {
		t.Errorf("Counter with the enforcer: %d, %v; want 1, true", n, ok)
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

// TestGuardCounter: the memory guard's count file (GuardFile) counts like the kernel's
// counter, alone or added to it.
func TestGuardCounter(t *testing.T) {
	guard := filepath.Join(t.TempDir(), "oom_kills")
	for _, withKernel := range []bool{false, true} {
		root := t.TempDir()
		if withKernel {
			os.WriteFile(filepath.Join(root, "memory.events"), []byte("oom_kill 4\n"), 0o644)
		}
		os.WriteFile(guard, []byte("0\n"), 0o644)
		w := Counter{Root: root, Guard: guard}.Start()
		if got := w.Reason(137); got != "" {
			t.Fatalf("kernel=%v: no kill yet: %q", withKernel, got)
		}
		os.WriteFile(guard, []byte("1\n"), 0o644)
		if got := w.Reason(137); got != Reason {
			t.Fatalf("kernel=%v: after a guard kill: %q", withKernel, got)
		}
	}
	// Without the file (runc sandboxes) the guard counts nothing.
	if _, ok := (Counter{Root: t.TempDir(), Guard: filepath.Join(t.TempDir(), "missing")}).Kills(); ok {
		t.Fatal("a missing guard file made a counter")
	}
}
