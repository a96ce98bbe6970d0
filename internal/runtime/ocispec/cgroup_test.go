package ocispec

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestSweepStrayCgroups: on the host's real cgroup hierarchies, the children of the parent that
// keep does not hold are removed with their own children and the process in one is killed; the
// kept one, its process and the cgroups of another parent are untouched.
func TestSweepStrayCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
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
	// A process in each of keep and stray (on the first hierarchy, the pids one if there is
	// one: enough to make its rmdir fail with EBUSY until the process is gone).
	root := host.CgroupRoots[0]
	for _, r := range host.CgroupRoots {
		if filepath.Base(r) == "pids" {
			root = r
		}
	}
	start := func(cg string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("sleep", "1000")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	kept := start(filepath.Join(root, parent, "keep"))
	stray := start(filepath.Join(root, parent, "stray"))
	strayDone := make(chan error, 1)
	go func() { strayDone <- stray.Wait() }()

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
