package testutil

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRequiresRoot runs the gate in a child test process: as the current user it runs or skips
// (with the reason), and with HUTCH_TEST_UNPRIVILEGED=1 it fails and names the list to edit.
func TestRequiresRoot(t *testing.T) {
	if os.Getenv("TESTUTIL_CHILD") == "1" {
		RequiresRoot(t, "mounts")
		t.Log("ran as root")
		return
	}
	run := func(env ...string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestRequiresRoot$", "-test.v")
		cmd.Env = append(os.Environ(), append(env, "TESTUTIL_CHILD=1")...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run(UnprivilegedEnv + "=0")
	switch {
	case os.Geteuid() == 0 && (err != nil || !strings.Contains(out, "ran as root")):
		t.Errorf("as root: %v\n%s", err, out)
	case os.Geteuid() != 0 && (err != nil || !strings.Contains(out, "SKIP") || !strings.Contains(out, "needs root (mounts)")):
		t.Errorf("not root: %v\n%s; want a skip with the reason", err, out)
	}
	out, err = run(UnprivilegedEnv + "=1")
	if err == nil || !strings.Contains(out, "--- FAIL") || !strings.Contains(out, PrivilegedList) || strings.Contains(out, "ran as root") {
		t.Errorf("unprivileged run: %v\n%s; want a failure naming %s", err, out, PrivilegedList)
	}
}

func TestPoll(t *testing.T) {
	n := 0
	if !Poll(t, time.Millisecond, time.Minute, func() bool { n++; return n == 3 }) || n != 3 {
		t.Errorf("Poll until the third call: n = %d", n)
	}
	// A condition that never holds: false after the timeout, with a last look at or after it.
	start := time.Now()
	var last time.Time
	if Poll(t, 5*time.Millisecond, 30*time.Millisecond, func() bool { last = time.Now(); return false }) {
		t.Error("Poll of a false condition = true")
	}
	if last.Sub(start) < 30*time.Millisecond {
		t.Errorf("last call %v after the start; want one at or after the 30ms deadline", last.Sub(start))
	}
	// A condition true at once is called once, without sleeping.
	n = 0
	if !Poll(t, time.Hour, time.Hour, func() bool { n++; return true }) || n != 1 {
		t.Errorf("Poll of a true condition: n = %d", n)
	}
}

func TestClock(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	c := NewClock(start)
	for _, step := range []struct {
		advance time.Duration
		want    time.Time
	}{
		{0, start},
		{1500 * time.Millisecond, start.Add(1500 * time.Millisecond)},
		{time.Hour, start.Add(time.Hour + 1500*time.Millisecond)},
	} {
		c.Advance(step.advance)
		if got := c.Now(); !got.Equal(step.want) {
			t.Errorf("after Advance(%v): Now = %v; want %v", step.advance, got, step.want)
		}
	}
}
