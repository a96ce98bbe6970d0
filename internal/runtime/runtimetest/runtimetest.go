// Package runtimetest is the conformance suite of the runtime.Runtime contract: the tests every
// isolation backend passes on real containers (the default image, an overlay root file system
// per container), run by each backend's own tests (internal/runtime/runc, internal/runtime/runsc)
// with Conformance. It needs root; without it the suite skips.
package runtimetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/image/imagetest"
	"github.com/hutchdev/hutch/internal/rootfs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/testutil"
)

// Runtime is what the suite drives: the contract, plus the tests' Exec and the container's
// host cgroups.
type Runtime interface {
	runtime.Runtime
	// Exec runs args in the running container and returns its exit code; err only when the
	// process could not run (errdefs.ErrNotFound for an unknown container) or ctx ended.
	Exec(ctx context.Context, id string, args []string, stdout, stderr io.Writer) (int, error)
	// CgroupDirs returns the host cgroup directories of container id.
	CgroupDirs(id string) []string
}

// Harness is one backend under test.
type Harness struct {
	// New returns a fresh runtime whose bundles are in dir/bundles (its state directory
	// elsewhere under dir), or skips the test when the backend cannot run here.
	New func(t *testing.T, dir string) Runtime
	// IDPrefix starts the container IDs of the suite's tests.
	IDPrefix string
}

// Env is one test's runtime, image and scratch space (the runtime's state, the bundles and
// the containers' overlays).
type Env struct {
	RT    Runtime
	Image string // the image's root file system (the overlays' lower layer)
	Dir   string
	h     Harness
}

// NewEnv skips the test without root, and returns a fresh runtime of h whose containers,
// and the overlays Spec mounted, are removed when the test ends.
func NewEnv(t *testing.T, h Harness) *Env {
	t.Helper()
	testutil.RequiresRoot(t, "run containers")
	img := imagetest.Default(t)
	dir := t.TempDir()
	rt := h.New(t, dir)
	e := &Env{RT: rt, Image: img.RootFS, Dir: dir, h: h}
	t.Cleanup(func() {
		// Whatever a failed test left: containers first, then mounts.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		states, _ := rt.List(ctx)
		for _, s := range states {
			if err := rt.Delete(ctx, s.ID, true); err != nil {
				t.Errorf("cleanup delete %s: %v", s.ID, err)
			}
		}
		mounts, _ := rootfs.ListMounts(dir)
		for _, m := range mounts {
			if err := rootfs.Unmount(m); err != nil {
				t.Errorf("cleanup unmount %s: %v", m, err)
			}
		}
	})
	return e
}

// NewID returns a fresh container ID of the harness's.
func (e *Env) NewID(t *testing.T) string { return NewID(e.h.IDPrefix) }

// NewID returns a fresh container ID that starts with prefix.
func NewID(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Spec mounts a fresh overlay for id and returns a spec running a long-lived PID 1 with half a
// CPU, 256 MiB and 64 tasks, its console log in the overlay's directory.
func (e *Env) Spec(t *testing.T, id string) runtime.Spec {
	t.Helper()
	base := filepath.Join(e.Dir, id)
	merged := filepath.Join(base, "merged")
	if err := rootfs.Mount(e.Image, filepath.Join(base, "upper"), filepath.Join(base, "work"), merged); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rootfs.Unmount(merged) })
	return runtime.Spec{
		ID:        id,
		RootFS:    merged,
		Args:      []string{"sleep", "infinity"},
		Env:       []string{"HOME=/root", "LANG=C.UTF-8"},
		Cwd:       "/workspace",
		Resources: runtime.Resources{MilliCPU: 500, MemoryBytes: 256 << 20, Pids: 64},
		LogPath:   filepath.Join(base, "console.log"),
	}
}

// Upper is the host path of the overlay upper directory of id's root file system (Spec).
func (e *Env) Upper(id string) string { return filepath.Join(e.Dir, id, "upper") }

// Ctx is a context that ends with the test, or after 3 minutes.
func Ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Exec runs args in id and returns its exit code and its output (stdout and stderr); a
// failure to run it ends the test.
func (e *Env) Exec(t *testing.T, id string, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code, err := e.RT.Exec(Ctx(t), id, args, &out, &out)
	if err != nil {
		t.Fatalf("exec %v: %v", args, err)
	}
	return code, out.String()
}

// WaitStopped waits until id's state says stopped for 10 reads in a row. runsc's "stopped"
// can flicker while PID 1 exits: twice in CI, `runsc state` said stopped, then running (Exec
// ran, and a plain delete was refused), probably because runsc asks the Sentry whether PID 1
// takes signal 0, which may fail for a task in the middle of its exit. hutchd deletes with
// force, so only tests meet it.
func (e *Env) WaitStopped(t *testing.T, id string) {
	t.Helper()
	ctx := Ctx(t)
	var (
		st   runtime.State
		err  error
		held int
	)
	if !testutil.Poll(t, 20*time.Millisecond, 30*time.Second, func() bool {
		if st, err = e.RT.State(ctx, id); err == nil && st.Status == runtime.StatusStopped {
			held++
		} else {
			held = 0
		}
		return held >= 10
	}) {
		t.Fatalf("state of %s = %+v, %v; want stopped", id, st, err)
	}
}

// WaitLog waits until the file at path holds want.
func WaitLog(t *testing.T, path, want string) {
	t.Helper()
	var b []byte
	if !testutil.Poll(t, 10*time.Millisecond, 30*time.Second, func() bool { b, _ = os.ReadFile(path); return string(b) == want }) {
		t.Fatalf("%s = %q after 30 s, want %q", path, b, want)
	}
}

// AssertGone checks that nothing of container id remains: the runtime does not know it
// (State, List), its cgroups are gone, no host process names it, its bundle is gone.
func (e *Env) AssertGone(t *testing.T, id string) {
	t.Helper()
	ctx := Ctx(t)
	if _, err := e.RT.State(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("State after Delete: %v, want ErrNotFound", err)
	}
	for _, d := range e.RT.CgroupDirs(id) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s remains: %v", d, err)
		}
	}
	list, err := e.RT.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.ID == id {
			t.Errorf("List still has %s", id)
		}
	}
	if pids := hostProcesses(id); len(pids) > 0 {
		t.Errorf("processes of %s remain: %v", id, pids)
	}
	if _, err := os.Stat(filepath.Join(e.Dir, "bundles", id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bundle remains: %v", err)
	}
}

// hostProcesses lists host PIDs whose command line mentions id (runsc's sandbox and gofer
// processes carry the container ID).
func hostProcesses(id string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(b, []byte(id)) {
			pids = append(pids, pid)
		}
	}
	return pids
}
