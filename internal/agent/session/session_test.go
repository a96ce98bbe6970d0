package session

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

func TestMergeState(t *testing.T) {
	old := map[string]string{"A": "1", "B": "2", "X.Y": "odd"}
	st := shellState{cwd: "/cmd", env: map[string]string{"A": "1", "B": "cmd", "C": "3", "N": "new"}}
	env, cwd := mergeState(old, "/sess", map[string]string{"B": "cmd", "C": "3", "D": "gone"}, "/cmd", st)
	want := map[string]string{"A": "1", "B": "2", "N": "new", "X.Y": "odd"}
	if !maps.Equal(env, want) || cwd != "/sess" {
		t.Fatalf("mergeState = %v %q; want %v /sess", env, cwd, want)
	}
	// The command changed a per-command key and cd'd away: both persist.
	st = shellState{cwd: "/elsewhere", env: map[string]string{"B": "changed"}}
	env, cwd = mergeState(old, "/sess", map[string]string{"B": "cmd"}, "/cmd", st)
	if env["B"] != "changed" || cwd != "/elsewhere" {
		t.Fatalf("mergeState = %v %q", env, cwd)
	}
}

func TestReadState(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s")
	write := func(s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("/w\n\x00declare -x A=\"1\"\ndeclare -x B=\"x=y\"\ndeclare -x _=\"/bin/x\"\ndeclare -x SHLVL=\"2\"\ndeclare -x UNSET\n\x00.\x00")
	st, ok, err := readState(p)
	if !ok || err != nil || st.cwd != "/w" || !maps.Equal(st.env, map[string]string{"A": "1", "B": "x=y"}) {
		t.Fatalf("readState = %v %v %v", st, ok, err)
	}
	write("/w\n\x00declare -x A=\"1\"\n") // cut short
	if _, ok, err := readState(p); ok || err != nil {
		t.Fatalf("incomplete state: %v %v", ok, err)
	}
	write("/w\n\x00declare -x A=\"1\n\x00.\x00") // malformed
	if _, ok, err := readState(p); ok || err == nil {
		t.Fatalf("malformed state: %v %v", ok, err)
	}
	if _, ok, _ := readState(filepath.Join(dir, "missing")); ok {
		t.Fatal("missing state accepted")
	}
}

// recorder is an Output that keeps everything.
type recorder struct {
	mu             sync.Mutex
	started        chan int
	stdout, stderr []byte
}

func newRecorder() *recorder { return &recorder{started: make(chan int, 1)} }

func (r *recorder) Start(pid int) error { r.started <- pid; return nil }
func (r *recorder) Stdout(p []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stdout = append(r.stdout, p...)
	return nil
}
func (r *recorder) Stderr(p []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stderr = append(r.stderr, p...)
	return nil
}

func newManager(t *testing.T) *Manager {
	t.Helper()
	m, err := NewManager(Config{Workdir: t.TempDir(), StateDir: t.TempDir(), Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func TestExecCancelAndClose(t *testing.T) {
	m := newManager(t)
	for _, stop := range []string{"ctx", "close"} {
		t.Run(stop, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			rec := newRecorder()
			mark := newExecID()
			done := make(chan error, 1)
			go func() {
				_, err := m.Exec(ctx, "s", Request{Command: "sleep 300 & setsid sleep 300 & wait", Env: map[string]string{"TESTMARK": mark}}, rec)
				done <- err
			}()
			<-rec.started
			// Both sleeps carry TESTMARK (a warm shell exports it after it started, so its own
			// environ does not).
			testutil.Poll(t, 10*time.Millisecond, 10*time.Second, func() bool { return len(FindMarked("TESTMARK", mark)) >= 2 })
			stopErr := errors.New("stopped by test")
			if stop == "ctx" {
				cancel(stopErr)
			} else {
				m.Close()
			}
			select {
			case err := <-done:
				if stop == "ctx" && !errors.Is(err, stopErr) {
					t.Fatalf("Exec = %v; want the cancel cause", err)
				}
				if stop == "close" && !errdefs.IsCode(err, errdefs.CodeUnavailable) {
					t.Fatalf("Exec = %v; want UNAVAILABLE", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("Exec did not return")
			}
			if pids := FindMarked("TESTMARK", mark); len(pids) != 0 {
				t.Fatalf("left: %v", pids)
			}
		})
	}
}

func TestExecOutputErrorKills(t *testing.T) {
	m := newManager(t)
	mark := newExecID()
	_, err := m.Exec(context.Background(), "", Request{Command: "echo x; sleep 300", Env: map[string]string{"TESTMARK": mark}}, failingOutput{})
	if err == nil || err.Error() != "sink broken" {
		t.Fatalf("Exec = %v; want the Output's error", err)
	}
	if pids := FindMarked("TESTMARK", mark); len(pids) != 0 {
		t.Fatalf("left: %v", pids)
	}
}

type failingOutput struct{}

func (failingOutput) Start(int) error     { return nil }
func (failingOutput) Stdout([]byte) error { return errors.New("sink broken") }
func (failingOutput) Stderr([]byte) error { return errors.New("sink broken") }

func TestValidateID(t *testing.T) {
	for id, ok := range map[string]bool{"default": true, "session-1": true, "A_b.c": true, "": false, "-x": false, "a b": false, "a/b": false} {
		if err := ValidateID(id); ok != (err == nil) {
			t.Errorf("ValidateID(%q) = %v; want ok=%v", id, err, ok)
		}
	}
}

// A session whose cwd disappeared runs its next commands in the workdir (with one warning),
// foreground and background; an explicit per-command cwd that is missing still fails.
func TestSessionCwdGone(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	gone := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	exec := func(req Request) (Result, *recorder) {
		t.Helper()
		rec := newRecorder()
		res, err := m.Exec(ctx, "s", req, rec)
		if err != nil {
			t.Fatalf("Exec(%q) = %v", req.Command, err)
		}
		return res, rec
	}
	if res, _ := exec(Request{Command: "cd " + gone}); res.ExitCode != 0 {
		t.Fatalf("cd: exit %d", res.ExitCode)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	// An explicit cwd that does not exist: exit 1, the session cwd is not touched.
	res, rec := exec(Request{Command: "pwd", Cwd: filepath.Join(gone, "x")})
	if res.ExitCode != 1 || !strings.Contains(string(rec.stderr), "No such file or directory") {
		t.Fatalf("missing per-command cwd: exit %d, stderr %q", res.ExitCode, rec.stderr)
	}
	if cwd, _ := m.Cwd("s"); cwd != gone {
		t.Fatalf("session cwd after a failed per-command cwd = %q; want %q", cwd, gone)
	}
	// The session's cwd is gone: the workdir, one warning, and the session moves there.
	res, rec = exec(Request{Command: "pwd"})
	want := "hutch: session cwd " + gone + " no longer exists; running in " + m.Workdir() + "\n"
	if res.ExitCode != 0 || string(rec.stdout) != m.Workdir()+"\n" || string(rec.stderr) != want {
		t.Fatalf("session cwd gone: exit %d, stdout %q, stderr %q; want %q", res.ExitCode, rec.stdout, rec.stderr, want)
	}
	if cwd, _ := m.Cwd("s"); cwd != m.Workdir() {
		t.Fatalf("session cwd = %q; want the workdir", cwd)
	}
	res, rec = exec(Request{Command: "pwd"})
	if res.ExitCode != 0 || string(rec.stdout) != m.Workdir()+"\n" || len(rec.stderr) != 0 {
		t.Fatalf("next command: exit %d, stdout %q, stderr %q", res.ExitCode, rec.stdout, rec.stderr)
	}

	// Background starts that inherit the session cwd do the same.
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	if res, _ := exec(Request{Command: "cd " + gone}); res.ExitCode != 0 {
		t.Fatalf("cd: exit %d", res.ExitCode)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var stdout, stderr []byte
	b, err := m.StartBackground("s", BackgroundRequest{Command: "pwd"}, func(isErr bool, p []byte) {
		mu.Lock()
		defer mu.Unlock()
		if isErr {
			stderr = append(stderr, p...)
		} else {
			stdout = append(stdout, p...)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("background command did not end")
	}
	mu.Lock()
	defer mu.Unlock()
	want = "hutch: session cwd " + gone + " no longer exists; running in " + m.Workdir() + "\n"
	if b.exitCode != 0 || string(stdout) != m.Workdir()+"\n" || string(stderr) != want || b.Cwd() != m.Workdir() {
		t.Fatalf("background: exit %d, stdout %q, stderr %q, cwd %q", b.exitCode, stdout, stderr, b.Cwd())
	}
	if cwd, _ := m.Cwd("s"); cwd != m.Workdir() {
		t.Fatalf("session cwd after the background start = %q; want the workdir", cwd)
	}
}
