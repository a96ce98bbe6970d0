package session

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

// bgOutput collects a background command's output.
type bgOutput struct {
	mu             sync.Mutex
	stdout, stderr []byte
}

func (o *bgOutput) add(stderr bool, p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if stderr {
		o.stderr = append(o.stderr, p...)
	} else {
		o.stdout = append(o.stdout, p...)
	}
}

func (o *bgOutput) get() (string, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.stdout), string(o.stderr)
}

// waitBackground waits for b with a generous bound against hangs.
func waitBackground(t *testing.T, b *Background) int {
	t.Helper()
	select {
	case <-b.Done():
		return b.Wait()
	case <-time.After(30 * time.Second):
		t.Fatal("background command did not end")
		return -1
	}
}

func TestBackgroundOutputStateAndExit(t *testing.T) {
	m := newManager(t)
	sub := filepath.Join(m.Workdir(), "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	execOK(t, m, "s", Request{Command: "export SESS=yes; cd sub"})
	out := &bgOutput{}
	b, err := m.StartBackground("s", BackgroundRequest{
		Command: `echo "$SESS $X $PWD"; echo err >&2; read line; echo "stdin=[$line]"; cd /; export SESS=changed; exit 3`,
		Env:     map[string]string{"X": "per-command"},
	}, out.add)
	if err != nil {
		t.Fatal(err)
	}
	if b.PID() <= 0 || b.Cwd() != sub {
		t.Fatalf("pid %d cwd %q; want >0, %q", b.PID(), b.Cwd(), sub)
	}
	if code := waitBackground(t, b); code != 3 {
		t.Fatalf("exit code = %d; want 3", code)
	}
	stdout, stderr := out.get()
	if want := "yes per-command " + sub + "\nstdin=[]\n"; stdout != want || stderr != "err\n" {
		t.Fatalf("output = %q, %q; want %q, err\\n", stdout, stderr, want)
	}
	// The session's state is untouched.
	got, _ := execOK(t, m, "s", Request{Command: `echo "$SESS ${X-unset} $PWD"`})
	if want := "yes unset " + sub + "\n"; got != want {
		t.Fatalf("session state after background = %q; want %q", got, want)
	}
	// Per-command cwd, relative to the session's.
	b, err = m.StartBackground("s", BackgroundRequest{Command: "pwd", Cwd: ".."}, out.add)
	if err != nil {
		t.Fatal(err)
	}
	if code := waitBackground(t, b); code != 0 || b.Cwd() != m.Workdir() {
		t.Fatalf("exit %d cwd %q", code, b.Cwd())
	}
}

func TestBackgroundErrors(t *testing.T) {
	m := newManager(t)
	for _, cmd := range []string{"", "  ", "a\x00b"} {
		if _, err := m.StartBackground("", BackgroundRequest{Command: cmd}, func(bool, []byte) {}); !errdefs.IsCode(err, errdefs.CodeInvalidCommand) {
			t.Errorf("StartBackground(%q) = %v; want INVALID_COMMAND", cmd, err)
		}
	}
	if _, err := m.StartBackground("bad id", BackgroundRequest{Command: "true"}, func(bool, []byte) {}); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
		t.Errorf("bad session id = %v; want VALIDATION_FAILED", err)
	}
	out := &bgOutput{}
	b, err := m.StartBackground("", BackgroundRequest{Command: "echo never", Cwd: "/nonexistent-dir"}, out.add)
	if err != nil {
		t.Fatal(err)
	}
	if code := waitBackground(t, b); code != 1 {
		t.Fatalf("missing cwd: exit %d; want 1", code)
	}
	if stdout, stderr := out.get(); stdout != "" || !strings.Contains(stderr, "/nonexistent-dir: No such file or directory") {
		t.Fatalf("missing cwd: output %q, %q", stdout, stderr)
	}
}

// A background command holds no lock: a foreground command of its session runs meanwhile.
func TestBackgroundDoesNotBlockExec(t *testing.T) {
	m := newManager(t)
	b, err := m.StartBackground("s", BackgroundRequest{Command: "sleep 300"}, func(bool, []byte) {})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Terminate(0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rec := newRecorder()
	res, err := m.Exec(ctx, "s", Request{Command: "echo fg"}, rec)
	if err != nil || res.ExitCode != 0 || string(rec.stdout) != "fg\n" {
		t.Fatalf("Exec while a background command runs = %v %v %q", res, err, rec.stdout)
	}
}

// lateFork starts one sleep at once and another in half a second, from a subshell that ignores
// SIGTERM until then and keeps running (the trailing ":" keeps it from exec'ing the sleep).
const lateFork = `sleep 300 & (trap "" TERM; sleep 0.5; trap - TERM; sleep 300; :); wait`

func TestBackgroundTerminate(t *testing.T) {
	shim := buildShim(t)
	tests := []struct {
		name     string
		shim     bool
		command  string
		grace    time.Duration
		wantCode []int
		up       int // sleeps running before Terminate; 0: every "sleep 300" of the command
	}{
		{"sleep", false, "sleep 300", 5 * time.Second, []int{143}, 0},
		{"children", true, "sh -c 'sleep 300 & sleep 300 & wait'", 5 * time.Second, []int{143}, 0},
		{"setsid grandchild", true, "sh -c 'setsid env -i sleep 300 & exit 0'; sleep 300", 5 * time.Second, []int{143}, 0},
		{"setsid grandchild no shim", false, "sh -c 'setsid sleep 300 & exit 0'; sleep 300", 5 * time.Second, []int{143}, 0},
		{"ignores TERM", true, `trap "" TERM; sleep 300`, 300 * time.Millisecond, []int{137}, 0},
		{"ignores TERM no shim", false, `trap "" TERM; sleep 300`, 300 * time.Millisecond, []int{137}, 0},
		// A process started after Terminate's first pass (here by a subshell that ignores TERM
		// for half a second, as bash forking the command as the SIGTERM arrives does) gets a
		// SIGTERM too, not only a SIGKILL after the grace: all is gone within it (143, not 137).
		{"forks later", true, lateFork, 5 * time.Second, []int{143}, 1},
		{"forks later no shim", false, lateFork, 5 * time.Second, []int{143}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Workdir: t.TempDir(), StateDir: t.TempDir(), Env: os.Environ()}
			if tt.shim {
				cfg.Shim = shim
			}
			m, err := NewManager(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			b, err := m.StartBackground("", BackgroundRequest{Command: tt.command}, func(bool, []byte) {})
			if err != nil {
				t.Fatal(err)
			}
			// Wait until the whole tree is up: two sleeps, or one when the tree has one.
			want := strings.Count(tt.command, "sleep 300")
			if tt.up > 0 {
				want = tt.up
			}
			testutil.Poll(t, 10*time.Millisecond, 10*time.Second, func() bool { return countSleeps(b.PID(), b.ExecID()) >= want })
			pids := sleepPIDs(b.PID(), b.ExecID())
			if len(pids) < want {
				t.Fatalf("tree not up: %v", pids)
			}
			if !b.Terminate(tt.grace) {
				t.Fatal("Terminate reported the command as already ended")
			}
			code := b.Wait()
			if !containsInt(tt.wantCode, code) {
				t.Fatalf("exit code = %d; want one of %v", code, tt.wantCode)
			}
			for _, p := range pids {
				// SIGKILL is delivered asynchronously: a killed process may take a moment under
				// load to be gone. One still alive after 2 s survived.
				if !testutil.Poll(t, 10*time.Millisecond, 2*time.Second, func() bool { return !p.alive() }) {
					exec.Command("kill", "-9", fmt.Sprint(p.pid)).Run()
					t.Errorf("process %d survived", p.pid)
				}
			}
			if b.Terminate(time.Second) {
				t.Fatal("second Terminate reported the command as running")
			}
		})
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// sleepPIDs returns the `sleep` processes below root or carrying the marker.
func sleepPIDs(root int, execID string) []procRef {
	seen := map[int]bool{}
	var out []procRef
	add := func(pid int) {
		if seen[pid] {
			return
		}
		seen[pid] = true
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(b)) != "sleep" {
			return
		}
		if st, ok := procStartTime(pid); ok {
			out = append(out, procRef{pid, st})
		}
	}
	for _, p := range descendants(root) {
		add(p.pid)
	}
	for _, pid := range FindMarked(MarkerEnv, execID) {
		add(pid)
	}
	return out
}

func countSleeps(root int, execID string) int { return len(sleepPIDs(root, execID)) }
