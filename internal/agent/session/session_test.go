package session

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
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
			deadline := time.Now().Add(10 * time.Second)
			// Both sleeps carry TESTMARK (a warm shell exports it after it started, so its own
			// environ does not).
			for len(FindMarked("TESTMARK", mark)) < 2 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
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
