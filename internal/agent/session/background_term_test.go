package session

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

// TestBackgroundTerminateWaitsForTree: bash dies of the SIGTERM at once, but a child that
// ignores it runs on; the command must not be reported ended (143) until the whole tree is
// gone, and then as killed after the grace (137).
func TestBackgroundTerminateWaitsForTree(t *testing.T) {
	shim := buildShim(t)
	for _, withShim := range []bool{true, false} {
		t.Run(fmt.Sprintf("shim=%v", withShim), func(t *testing.T) {
			cfg := Config{Workdir: t.TempDir(), StateDir: t.TempDir(), Env: os.Environ()}
			if withShim {
				cfg.Shim = shim
			}
			m, err := NewManager(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			// The outer bash keeps the default SIGTERM action; sh and its sleep ignore it.
			b, err := m.StartBackground("", BackgroundRequest{Command: `sh -c 'trap "" TERM; sleep 300; :'; echo after`},
				func(bool, []byte) {})
			if err != nil {
				t.Fatal(err)
			}
			testutil.Poll(t, 10*time.Millisecond, 10*time.Second, func() bool { return countSleeps(b.PID(), b.ExecID()) >= 1 })
			pids := sleepPIDs(b.PID(), b.ExecID())
			if len(pids) != 1 {
				t.Fatalf("sleep not up: %v", pids)
			}
			go b.Terminate(500 * time.Millisecond)
			<-b.Done()
			if pids[0].alive() {
				syscall.Kill(pids[0].pid, syscall.SIGKILL)
				t.Fatalf("command reported ended (exit %d) while its sleep still runs", b.Wait())
			}
			if code := b.Wait(); code != 137 {
				t.Fatalf("exit code = %d; want 137 (killed after the grace)", code)
			}
		})
	}
}

// TestShimIgnoresSIGTERM: a SIGTERM sent to the shim itself does not end it (which would
// report the command ended while bash runs on); the command finishes normally.
func TestShimIgnoresSIGTERM(t *testing.T) {
	shim := buildShim(t)
	m, err := NewManager(Config{Workdir: t.TempDir(), StateDir: t.TempDir(), Env: os.Environ(), Shim: shim})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	b, err := m.StartBackground("", BackgroundRequest{Command: "cat " + fifo + "; echo done"},
		func(stderr bool, p []byte) { out.Write(p) })
	if err != nil {
		t.Fatal(err)
	}
	defer b.Terminate(0)
	testutil.Poll(t, 10*time.Millisecond, 10*time.Second, func() bool { return hasDescendantNamed(b.PID(), "cat") })
	if err := syscall.Kill(b.PID(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fifo, []byte("x\n"), 0); err != nil {
		t.Fatal(err)
	}
	if code := b.Wait(); code != 0 || out.String() != "x\ndone\n" {
		t.Fatalf("exit %d, output %q; want 0 and x, done", code, out.String())
	}
}

func hasDescendantNamed(root int, comm string) bool {
	for _, p := range descendants(root) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.pid))
		if err == nil && strings.TrimSpace(string(b)) == comm {
			return true
		}
	}
	return false
}

// TestBackgroundShimStartFailure: when the shim cannot start bash (as when fork fails under
// pid pressure), or dies before it reports, the start fails with STREAM_START_ERROR and a
// reason, instead of a command that "exited 125".
func TestBackgroundShimStartFailure(t *testing.T) {
	shim := buildShim(t)
	tests := []struct {
		name string
		shim []string
		want string
	}{
		{"exec fails", append(shim, "/nonexistent/bash"), "no such file"},
		{"shim dies", []string{"/bin/sh", "-c", "exit 3", "sh"}, "exit 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewManager(Config{Workdir: t.TempDir(), StateDir: t.TempDir(), Env: os.Environ(), Shim: tt.shim})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			_, err = m.StartBackground("", BackgroundRequest{Command: "true"}, func(bool, []byte) {})
			if !errdefs.IsCode(err, errdefs.CodeStreamStartError) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("StartBackground = %v; want STREAM_START_ERROR naming %q", err, tt.want)
			}
		})
	}
}
