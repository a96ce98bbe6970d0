package runtimetest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/testutil"
)

// conformance is the contract every backend keeps.
var conformance = []struct {
	name string
	run  func(t *testing.T, e *Env)
}{
	{"Lifecycle", testLifecycle},
	{"DeleteRunning", testDeleteRunning},
	{"KillPid1AndDeleteStopped", testKillPid1AndDeleteStopped},
	{"UnknownContainer", testUnknownContainer},
	{"StartFailureLeavesNothing", testStartFailureLeavesNothing},
	{"ExtraFiles", testExtraFiles},
	{"PauseResume", testPauseResume},
}

// Conformance runs the suite against h's backend, one subtest per part of the contract, each
// with a fresh runtime.
func Conformance(t *testing.T, h Harness) {
	for _, c := range conformance {
		t.Run(c.name, func(t *testing.T) { c.run(t, NewEnv(t, h)) })
	}
}

// testLifecycle: Start runs PID 1 and reports it; a second Start of the ID is refused and
// changes nothing; State and List report the container; commands run in it, in its root file
// system (whose writes reach the overlay's upper directory at once), with its hostname and
// working directory, with no right to mount; PID 1 is in the container's cgroup; Delete
// without force refuses a running container; Kill of every process stops it; Delete removes
// all of it, and a second Delete is no error.
func testLifecycle(t *testing.T, e *Env) {
	ctx := Ctx(t)
	id := e.NewID(t)
	spec := e.Spec(t, id)
	st, err := e.RT.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != id || st.Status != runtime.StatusRunning || st.Pid <= 0 {
		t.Fatalf("Start = %+v", st)
	}
	if _, err := e.RT.Start(ctx, spec); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("second Start: %v, want ErrAlreadyExists", err)
	}
	if got, err := e.RT.State(ctx, id); err != nil || got != st {
		t.Fatalf("State = %+v, %v; want %+v", got, err, st)
	}
	if list, err := e.RT.List(ctx); err != nil || len(list) != 1 || list[0] != st {
		t.Fatalf("List = %+v, %v", list, err)
	}
	for _, c := range []struct {
		name     string
		args     []string
		wantCode int
		want     string // substring of the output
	}{
		{"hostname", []string{"hostname"}, 0, id},
		{"cwd", []string{"pwd"}, 0, "/workspace"},
		{"write", []string{"sh", "-c", "echo from-container > /workspace/hello.txt"}, 0, ""},
		{"mount denied", []string{"mount", "-t", "tmpfs", "none", "/mnt"}, 32, ""},
		{"python", []string{"python3", "-c", "print(6*7)"}, 0, "42"},
		{"exit code", []string{"sh", "-c", "exit 7"}, 7, ""},
	} {
		code, out := e.Exec(t, id, c.args...)
		if code != c.wantCode || !strings.Contains(out, c.want) {
			t.Errorf("%s: %v: exit %d, output %q; want exit %d containing %q", c.name, c.args, code, out, c.wantCode, c.want)
		}
	}
	upperFile := filepath.Join(e.Upper(id), "workspace", "hello.txt")
	if b, err := os.ReadFile(upperFile); err != nil || string(b) != "from-container\n" {
		t.Errorf("upper dir while running: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(e.Image, "workspace", "hello.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("write reached the image: %v", err)
	}
	inCgroup := false
	for _, d := range e.RT.CgroupDirs(id) {
		if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil && containsLine(string(b), strconv.Itoa(st.Pid)) {
			inCgroup = true
		}
	}
	if !inCgroup {
		t.Errorf("PID 1 (host pid %d) is in none of %v", st.Pid, e.RT.CgroupDirs(id))
	}
	if err := e.RT.Delete(ctx, id, false); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Delete of running container without force: %v, want ErrFailedPrecondition", err)
	}
	if err := e.RT.Kill(ctx, id, syscall.SIGKILL, true); err != nil {
		t.Fatal(err)
	}
	e.WaitStopped(t, id)
	if err := e.RT.Delete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	e.AssertGone(t, id)
	if err := e.RT.Delete(ctx, id, true); err != nil {
		t.Errorf("second Delete: %v", err)
	}
}

func containsLine(s, line string) bool {
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// testDeleteRunning: Delete with force removes a running container, every process of it
// (hutchd's stop).
func testDeleteRunning(t *testing.T, e *Env) {
	ctx := Ctx(t)
	id := e.NewID(t)
	if _, err := e.RT.Start(ctx, e.Spec(t, id)); err != nil {
		t.Fatal(err)
	}
	if err := e.RT.Delete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	e.AssertGone(t, id)
}

// testKillPid1AndDeleteStopped: a SIGKILL to PID 1 stops the container (no PID left); signals
// and commands are refused from then on; Delete without force removes a stopped container; PID 1's output
// is in the console log.
func testKillPid1AndDeleteStopped(t *testing.T, e *Env) {
	ctx := Ctx(t)
	id := e.NewID(t)
	spec := e.Spec(t, id)
	spec.Args = []string{"sh", "-c", "echo started; exec sleep infinity"}
	if _, err := e.RT.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	// Kill only once PID 1 has written its line (a kill before it runs would lose it).
	WaitLog(t, spec.LogPath, "started\n")
	if err := e.RT.Kill(ctx, id, syscall.SIGKILL, false); err != nil {
		t.Fatal(err)
	}
	e.WaitStopped(t, id)
	if st, _ := e.RT.State(ctx, id); st.Pid != 0 {
		t.Errorf("stopped container has pid %d", st.Pid)
	}
	if err := e.RT.Kill(ctx, id, syscall.SIGTERM, false); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Kill of stopped container: %v, want ErrFailedPrecondition", err)
	}
	if code, err := e.RT.Exec(ctx, id, []string{"true"}, nil, nil); err == nil {
		t.Errorf("Exec in stopped container = %d, nil; want error", code)
	}
	if err := e.RT.Delete(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	e.AssertGone(t, id)
	if b, err := os.ReadFile(spec.LogPath); err != nil || string(b) != "started\n" {
		t.Errorf("console log = %q, %v", b, err)
	}
}

// testUnknownContainer: an unknown ID is ErrNotFound for State, Kill, Exec and Pause, no
// error for Delete; an ID that is no container ID is ErrInvalidArgument; a fresh runtime
// lists nothing.
func testUnknownContainer(t *testing.T, e *Env) {
	ctx := Ctx(t)
	if _, err := e.RT.State(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("State: %v", err)
	}
	if err := e.RT.Kill(ctx, "nope", syscall.SIGTERM, false); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Kill: %v", err)
	}
	if _, err := e.RT.Exec(ctx, "nope", []string{"true"}, nil, nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Exec: %v", err)
	}
	if p, ok := e.RT.(runtime.Pauser); ok {
		if err := p.Pause(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Pause: %v", err)
		}
	}
	if err := e.RT.Delete(ctx, "nope", false); err != nil {
		t.Errorf("Delete: %v", err)
	}
	for _, bad := range []string{"../x", "", "UPPER", strings.Repeat("a", 64)} {
		if _, err := e.RT.State(ctx, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("State(%q): %v, want ErrInvalidArgument", bad, err)
		}
		if err := e.RT.Delete(ctx, bad, true); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Delete(%q): %v, want ErrInvalidArgument", bad, err)
		}
	}
	if list, err := e.RT.List(ctx); err != nil || len(list) != 0 {
		t.Errorf("List = %v, %v", list, err)
	}
}

// testStartFailureLeavesNothing: a PID 1 that cannot run fails Start with the backend's
// message, and nothing of the container remains.
func testStartFailureLeavesNothing(t *testing.T, e *Env) {
	ctx := Ctx(t)
	id := e.NewID(t)
	spec := e.Spec(t, id)
	spec.Args = []string{"/no/such/binary"}
	_, err := e.RT.Start(ctx, spec)
	if err == nil {
		t.Fatal("Start of a missing binary succeeded")
	}
	if !strings.Contains(err.Error(), "no such file") {
		t.Errorf("error does not carry the backend's message: %v", err)
	}
	e.AssertGone(t, id)
}

// testExtraFiles: a backend whose Features say it refuses Spec.ExtraFiles refuses them with
// ErrInvalidArgument and starts nothing; any other hands them to PID 1 as fd 3, ….
func testExtraFiles(t *testing.T, e *Env) {
	ctx := Ctx(t)
	id := e.NewID(t)
	spec := e.Spec(t, id)
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spec.ExtraFiles = []*os.File{f}
	spec.Args = []string{"sh", "-c", "test -e /proc/self/fd/3 && echo fd3 || echo none; exec sleep infinity"}
	_, err = e.RT.Start(ctx, spec)
	if e.RT.Features().RefusesExtraFiles {
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Start with ExtraFiles: %v, want ErrInvalidArgument", err)
		}
		e.AssertGone(t, id)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	WaitLog(t, spec.LogPath, "fd3\n")
	if err := e.RT.Delete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	e.AssertGone(t, id)
}

// testPauseResume, for a runtime.Pauser: a paused container's processes make no progress and
// its state says paused; a second Pause is refused; after Resume they continue, and a second
// Resume is refused; Delete with force removes a paused container.
func testPauseResume(t *testing.T, e *Env) {
	p, ok := e.RT.(runtime.Pauser)
	if !ok {
		t.Skip(e.RT.Name() + " cannot pause")
	}
	ctx := Ctx(t)
	id := e.NewID(t)
	spec := e.Spec(t, id)
	counter := filepath.Join(e.Upper(id), "count")
	spec.Args = []string{"sh", "-c", "i=0; while :; do i=$((i+1)); echo $i > /count; sleep 0.01; done"}
	if _, err := e.RT.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	read := func() string { b, _ := os.ReadFile(counter); return strings.TrimSpace(string(b)) }
	if !testutil.Poll(t, 10*time.Millisecond, 30*time.Second, func() bool { return read() != "" }) {
		t.Fatal("counter never written")
	}
	if err := p.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if st, err := e.RT.State(ctx, id); err != nil || st.Status != runtime.StatusPaused {
		t.Fatalf("state after Pause = %+v, %v", st, err)
	}
	if err := p.Pause(ctx, id); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("second Pause: %v, want ErrFailedPrecondition", err)
	}
	before := read()
	time.Sleep(200 * time.Millisecond)
	if after := read(); after != before {
		t.Errorf("counter moved while paused: %s → %s", before, after)
	}
	if err := p.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	if !testutil.Poll(t, 10*time.Millisecond, 30*time.Second, func() bool { return read() != before }) {
		t.Fatal("counter did not move after Resume")
	}
	if err := p.Resume(ctx, id); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Resume of a running container: %v, want ErrFailedPrecondition", err)
	}
	if err := p.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := e.RT.Delete(ctx, id, true); err != nil {
		t.Fatalf("Delete of a paused container: %v", err)
	}
	e.AssertGone(t, id)
}
