package ocispec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/testutil"
)

// TestSweepStrayCgroups: on the host's real cgroup hierarchies, the children of the parent that
// keep does not hold are removed with their own children and the process in one is killed; the
// kept one, its process and the cgroups of another parent are untouched.
func TestSweepStrayCgroups(t *testing.T) {
	testutil.RequiresRoot(t, "create cgroups")
	host, err := ProbeHost()
	if err != nil {
		t.Fatal(err)
	}
	parent := fmt.Sprintf("hutchsweep-%d", os.Getpid())
	other := parent + "-other"
	b := Builder{Host: host, CgroupParent: parent}
	t.Cleanup(func() {
		for _, p := range []string{parent, other} {
			for _, root := range host.CgroupRoots {
				if err := removeCgroup(context.Background(), filepath.Join(root, p)); err != nil {
					t.Error(err)
				}
			}
		}
	})

	mk := func(parent, rel string) {
		t.Helper()
		for _, root := range host.CgroupRoots {
			if err := os.MkdirAll(filepath.Join(root, parent, rel), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk(parent, "keep")
	mk(parent, "stray")
	mk(parent, "nested/child/grandchild")
	mk(other, "stray")
	// A process in each of keep and stray, on every hierarchy (its rmdir fails with EBUSY until
	// the process is gone).
	start := func(name string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("sleep", "1000")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		for _, root := range host.CgroupRoots {
			err := os.WriteFile(filepath.Join(root, parent, name, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
			if err != nil && !errors.Is(err, syscall.ENOSPC) { // ENOSPC: v1 cpuset without cpus
				t.Fatal(err)
			}
		}
		return cmd
	}
	kept := start("keep")
	stray := start("stray")
	strayDone := make(chan error, 1)
	go func() { strayDone <- stray.Wait() }()
	// The stray one is frozen, as a paused container's is (a snapshot cut short): a frozen
	// process does not die of SIGKILL until it is thawed.
	freeze := func(state map[string]string) bool {
		done := false
		for _, root := range host.CgroupRoots {
			for file, value := range state {
				if os.WriteFile(filepath.Join(root, parent, "stray", file), []byte(value), 0) == nil {
					done = true
				}
			}
		}
		return done
	}
	frozen := freeze(map[string]string{"freezer.state": "FROZEN", "cgroup.freeze": "1"})
	// If the sweep failed to, the test thaws it before killing its process (runs first).
	t.Cleanup(func() { freeze(map[string]string{"freezer.state": "THAWED", "cgroup.freeze": "0"}) })
	if !frozen {
		t.Error("could not freeze the stray cgroup (no freezer.state or cgroup.freeze)")
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	removed, err := b.SweepStrayCgroups(ctx, func(id string) bool { return id == "keep" })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"nested", "stray"}; !slices.Equal(removed, want) {
		t.Errorf("removed %v; want %v", removed, want)
	}
	for _, r := range host.CgroupRoots {
		for rel, want := range map[string]bool{
			parent + "/keep": true, parent + "/stray": false, parent + "/nested": false, other + "/stray": true,
		} {
			_, err := os.Stat(filepath.Join(r, rel))
			if got := err == nil; got != want {
				t.Errorf("%s exists = %v after the sweep; want %v", filepath.Join(r, rel), got, want)
			}
		}
	}
	select {
	case <-strayDone:
	case <-time.After(10 * time.Second):
		t.Error("the process in the stray cgroup was not killed")
	}
	if err := kept.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the process in the kept cgroup: %v", err)
	}
	// A parent that does not exist is no error.
	if removed, err := (Builder{Host: host, CgroupParent: parent + "-none"}).SweepStrayCgroups(ctx, func(string) bool { return false }); err != nil || len(removed) != 0 {
		t.Errorf("sweep of a missing parent = %v, %v; want nothing, nil", removed, err)
	}
}
