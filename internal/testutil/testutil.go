// Package testutil holds what tests share: the gate for tests that need root, polling for a
// condition with a deadline, and a fake clock.
package testutil

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// UnprivilegedEnv, when set to 1, marks a run of the packages that scripts/test.sh runs in
// parallel. A test that asks for root there fails instead of running or skipping: its package
// shares the host's kernel state (mounts, namespaces, nftables, cgroups) and belongs in
// scripts/privileged-packages, which runs one package at a time.
const UnprivilegedEnv = "HUTCH_TEST_UNPRIVILEGED"

// PrivilegedList is the file, relative to the repository root, that names the packages
// scripts/test.sh runs one at a time.
const PrivilegedList = "scripts/privileged-packages"

// RequiresRoot skips t unless it runs as root; why says what the test needs root for. In an
// unprivileged run (UnprivilegedEnv) it fails t: see UnprivilegedEnv.
func RequiresRoot(t testing.TB, why string) {
	t.Helper()
	switch reason, misplaced := rootGate(why); {
	case misplaced:
		t.Fatal(reason)
	case reason != "":
		t.Skip(reason)
	}
}

// MainRequiresRoot is RequiresRoot for TestMain, which has no t: it returns the reason to skip
// the package's tests ("" as root), and in an unprivileged run it prints the misplacement and
// exits with status 2.
func MainRequiresRoot(why string) string {
	reason, misplaced := rootGate(why)
	if misplaced {
		fmt.Fprintln(os.Stderr, reason)
		os.Exit(2)
	}
	return reason
}

func rootGate(why string) (reason string, misplaced bool) {
	if os.Getenv(UnprivilegedEnv) == "1" {
		return fmt.Sprintf("needs root (%s) but runs with %s=1: list the package in %s", why, UnprivilegedEnv, PrivilegedList), true
	}
	if os.Geteuid() != 0 {
		return "needs root (" + why + ")", false
	}
	return "", false
}

// Poll calls cond every interval until it returns true, and reports whether it did before
// timeout passed. cond runs at least once, and once more at or after the deadline, so a slow
// machine that misses every earlier round still gets a last look.
func Poll(t testing.TB, interval, timeout time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}

// Clock is a fake clock for code that takes a `Now func() time.Time` (a Config field, say):
// its time moves only when Advance is called, so a test of an expiry or a refill steps over
// the wait instead of sleeping through it. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock that reads start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// RunWithEmptyHome runs m with HOME set to a new empty directory and returns its exit code,
// for a TestMain: tests that start interactive shells (terminals, sessions) read ~/.bashrc,
// and a host user's rc file (a version manager's init, say) can take tens of seconds or hang,
// which would fail them for reasons outside the code under test.
func RunWithEmptyHome(m *testing.M) int {
	home, err := os.MkdirTemp("", "hutch-test-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(home)
	if err := os.Setenv("HOME", home); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
