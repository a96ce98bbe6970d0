package store

import (
	"context"
	"errors"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestDirMounts(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if _, err := s.Insert(ctx, Sandbox{ID: "sb1", Status: "running"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutDirMount(ctx, DirMount{SandboxID: "nope", Path: "/workspace/a", BackupID: "b", MountID: "m"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("mount in unknown sandbox: %v", err)
	}
	put := func(path, backup, mid string) []DirMount {
		t.Helper()
		gone, err := s.PutDirMount(ctx, DirMount{SandboxID: "sb1", Path: path, BackupID: backup, MountID: mid})
		if err != nil {
			t.Fatal(err)
		}
		return gone
	}
	put("/workspace/a/b", "b1", "m1")
	put("/workspace/ab", "b2", "m2")
	put("/workspace/a/b/c", "b3", "m3")
	ms, err := s.DirMounts(ctx, "sb1")
	if err != nil || len(ms) != 3 || ms[0].Path != "/workspace/ab" || ms[1].Path != "/workspace/a/b" || ms[2].Path != "/workspace/a/b/c" {
		t.Fatalf("DirMounts = %+v, %v (want parents first)", ms, err)
	}
	// A mount at /workspace/a replaces the ones below it, not /workspace/ab.
	gone := put("/workspace/a", "b4", "m4")
	if len(gone) != 2 || gone[0].MountID != "m1" || gone[1].MountID != "m3" {
		t.Fatalf("replaced = %+v", gone)
	}
	if gone := put("/workspace/a", "b5", "m5"); len(gone) != 1 || gone[0].MountID != "m4" {
		t.Fatalf("replaced same path = %+v", gone)
	}
	used, err := s.MountedBackups(ctx)
	if err != nil || len(used) != 2 || !used["b2"] || !used["b5"] {
		t.Fatalf("MountedBackups = %v, %v", used, err)
	}
	if err := s.DeleteDirMount(ctx, "sb1", "/workspace/ab"); err != nil {
		t.Fatal(err)
	}
	// Destroying the sandbox drops its mounts.
	if err := s.Delete(ctx, "sb1"); err != nil {
		t.Fatal(err)
	}
	if ms, err := s.DirMounts(ctx, "sb1"); err != nil || len(ms) != 0 {
		t.Fatalf("after delete: %+v, %v", ms, err)
	}
}
