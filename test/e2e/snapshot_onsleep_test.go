package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

// layerBlob is the blob store file of layer digest.
func layerBlob(digest string) string {
	return filepath.Join(d.StateDir, "blobs", "layers", digest+".tar.zst")
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// TestSnapshotOnSleep: a sandbox with snapshotOnSleep is snapshotted when it sleeps; another
// sandbox is made from that snapshot (what a host that never saw the first would do); deleting
// the snapshot keeps the layers the second sandbox uses, and the GC removes them once nothing
// does. A snapshot that fails does not keep the sandbox from sleeping.
func TestSnapshotOnSleep(t *testing.T) {
	requireEnv(t)
	c := d.Client()
	src := sandbox(t, "e2e-onsleep-src", &client.SandboxOptions{InstanceType: "lite", SnapshotOnSleep: true})
	if info, err := src.Info(ctxT(t, time.Minute)); err != nil || !info.SnapshotOnSleep || info.LastSnapshot != "" {
		t.Fatalf("Info = %+v, %v; want snapshotOnSleep and no snapshot yet", info, err)
	}
	mustExec(t, src, "mkdir -p /workspace/onsleep && echo hello-from-sleep > /workspace/onsleep/a.txt && head -c 1048576 /dev/urandom > /workspace/onsleep/big && sha256sum /workspace/onsleep/big > /workspace/onsleep/big.sum")

	info, err := src.Sleep(ctxT(t, 5*time.Minute))
	if err != nil {
		t.Fatalf("Sleep: %v\n%s", err, d.LogTail())
	}
	if info.Status != client.StatusSleeping || info.LastSnapshot == "" || info.LastSnapshotError != "" {
		t.Fatalf("after Sleep: status %s lastSnapshot %q lastSnapshotError %q; want sleeping with a snapshot\n%s",
			info.Status, info.LastSnapshot, info.LastSnapshotError, d.LogTail())
	}
	snapID := info.LastSnapshot
	snap, err := c.GetSnapshot(ctxT(t, time.Minute), snapID)
	if err != nil {
		t.Fatalf("GetSnapshot(%s): %v", snapID, err)
	}
	if snap.SandboxID != src.ID() || len(snap.Layers) != 1 {
		t.Fatalf("snapshot = %+v; want one layer of %s", snap, src.ID())
	}
	layer := snap.Layers[0].Digest
	if !exists(layerBlob(layer)) {
		t.Fatalf("layer blob %s missing", layerBlob(layer))
	}

	// Another sandbox from the snapshot ID alone sees the files.
	dst, err := c.Sandbox(ctxT(t, 5*time.Minute), "e2e-onsleep-dst", &client.SandboxOptions{Snapshot: snapID})
	if err != nil {
		t.Fatalf("Sandbox from snapshot: %v\n%s", err, d.LogTail())
	}
	destroyDst := func() error {
		err := dst.Destroy(ctxT(t, time.Minute))
		if errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
			return nil
		}
		return err
	}
	t.Cleanup(func() { _ = destroyDst() })
	if got := mustExec(t, dst, "cat /workspace/onsleep/a.txt && cd /workspace/onsleep && sha256sum -c big.sum >/dev/null && echo big-ok"); got != "hello-from-sleep\nbig-ok\n" {
		t.Fatalf("files in the sandbox from the snapshot: %q", got)
	}

	// Deleting the snapshot keeps the layer the second sandbox is built on.
	if err := c.DeleteSnapshot(ctxT(t, time.Minute), snapID); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	if _, err := c.GetSnapshot(ctxT(t, time.Minute), snapID); !errdefs.IsCode(err, errdefs.CodeSnapshotNotFound) {
		t.Fatalf("GetSnapshot after delete = %v; want SNAPSHOT_NOT_FOUND", err)
	}
	if err := c.DeleteSnapshot(ctxT(t, time.Minute), snapID); !errdefs.IsCode(err, errdefs.CodeSnapshotNotFound) {
		t.Fatalf("second DeleteSnapshot = %v; want SNAPSHOT_NOT_FOUND", err)
	}
	if !exists(layerBlob(layer)) {
		t.Fatal("layer blob deleted while a sandbox still uses it")
	}
	if got := mustExec(t, dst, "cat /workspace/onsleep/a.txt"); got != "hello-from-sleep\n" {
		t.Fatalf("sandbox from the deleted snapshot: %q", got)
	}

	// Nothing uses the layer once the second sandbox is gone: the GC that runs after the next
	// snapshot deletion removes it. Snapshot the (still sleeping) source again and delete that.
	if err := destroyDst(); err != nil {
		t.Fatalf("Destroy(dst): %v", err)
	}
	again, err := src.Snapshot(ctxT(t, 5*time.Minute))
	if err != nil {
		t.Fatalf("Snapshot of the sleeping source: %v", err)
	}
	if err := c.DeleteSnapshot(ctxT(t, time.Minute), again.ID); err != nil {
		t.Fatalf("DeleteSnapshot(%s): %v", again.ID, err)
	}
	for _, l := range append(again.Layers, snap.Layers...) {
		if exists(layerBlob(l.Digest)) {
			t.Fatalf("layer blob %s still there after the GC", l.Digest)
		}
	}
	if info, err := src.Info(ctxT(t, time.Minute)); err != nil || info.Status != client.StatusSleeping {
		t.Fatalf("source = %+v, %v; want still sleeping", info, err)
	}

	t.Run("failure does not block the sleep", func(t *testing.T) {
		// The layer upload fails: blobs/layers is a file, not a directory.
		dir := filepath.Join(d.StateDir, "blobs", "layers")
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(dir) })
		mustExec(t, src, "echo changed > /workspace/onsleep/b.txt") // wakes it
		info, err := src.Sleep(ctxT(t, 5*time.Minute))
		if err != nil {
			t.Fatalf("Sleep with a failing snapshot: %v\n%s", err, d.LogTail())
		}
		if info.Status != client.StatusSleeping || info.LastSnapshotError == "" || info.LastSnapshot != snapID {
			t.Fatalf("after failed snapshot: status %s lastSnapshot %q lastSnapshotError %q; want sleeping, the old ID and an error",
				info.Status, info.LastSnapshot, info.LastSnapshotError)
		}
		// It wakes as usual.
		if got := mustExec(t, src, "cat /workspace/onsleep/b.txt"); got != "changed\n" {
			t.Fatalf("after wake: %q", got)
		}
	})
}

// TestSnapshotOnSleepRetention: three sleeps of a sandbox with snapshotOnSleep keep only the
// newest sleep snapshot (the default of one), and the layer blobs of the older ones go; a
// snapshot asked for in between is the user's and stays; destroying the sandbox deletes its
// sleep snapshot, and the layer blob nothing else uses goes too.
func TestSnapshotOnSleepRetention(t *testing.T) {
	requireEnv(t)
	c := d.Client()
	sb, err := c.Sandbox(ctxT(t, 5*time.Minute), "e2e-onsleep-keep", &client.SandboxOptions{InstanceType: "lite", SnapshotOnSleep: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Destroy(ctxT(t, time.Minute)) })
	var sleepLayers []string
	var requested string
	var last string
	for i := range 3 {
		if i == 1 { // a disk no sleep snapshot captures
			mustExec(t, sb, "echo asked > /workspace/k/requested")
			snap, err := sb.Snapshot(ctxT(t, 5*time.Minute))
			if err != nil {
				t.Fatalf("requested Snapshot: %v", err)
			}
			requested = snap.ID
		}
		// 2 MiB of new data each cycle: every sleep snapshot differs from the one before.
		mustExec(t, sb, fmt.Sprintf("mkdir -p /workspace/k && head -c 2097152 /dev/urandom > /workspace/k/f%d", i))
		info, err := sb.Sleep(ctxT(t, 5*time.Minute))
		if err != nil {
			t.Fatalf("Sleep %d: %v\n%s", i, err, d.LogTail())
		}
		if info.LastSnapshot == "" || info.LastSnapshotError != "" || info.LastSnapshot == last {
			t.Fatalf("sleep %d: lastSnapshot %q (before %q), error %q", i, info.LastSnapshot, last, info.LastSnapshotError)
		}
		last = info.LastSnapshot
		snap, err := c.GetSnapshot(ctxT(t, time.Minute), last)
		if err != nil {
			t.Fatalf("GetSnapshot(%s): %v", last, err)
		}
		sleepLayers = append(sleepLayers, snap.Layers[0].Digest)
		list, err := c.ListSnapshots(ctxT(t, time.Minute), sb.ID())
		if err != nil {
			t.Fatal(err)
		}
		var ids, origins []string
		for _, s := range list {
			ids, origins = append(ids, s.ID), append(origins, s.Origin)
		}
		want, wantOrigins := []string{last}, []string{"sleep"}
		if requested != "" {
			want, wantOrigins = []string{requested, last}, []string{"request", "sleep"}
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("after sleep %d the sandbox's snapshots are %v; want %v (the requested one and the newest sleep one)", i, ids, want)
		}
		if !slices.Equal(origins, wantOrigins) {
			t.Errorf("after sleep %d the snapshots' origins are %v; want %v", i, origins, wantOrigins)
		}
		mustExec(t, sb, "true") // wake it
	}
	for _, l := range sleepLayers[:2] {
		if exists(layerBlob(l)) {
			t.Errorf("layer blob %s of a pruned sleep snapshot is still stored", l)
		}
	}
	if err := sb.Destroy(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListSnapshots(ctxT(t, time.Minute), sb.ID())
	if err != nil || len(list) != 1 || list[0].ID != requested {
		t.Fatalf("after destroy the sandbox's snapshots are %+v, %v; want only the requested %s", list, err, requested)
	}
	// The blob GC after a destroy runs in the background.
	if !testutil.Poll(t, 100*time.Millisecond, 2*time.Minute, func() bool { return !exists(layerBlob(sleepLayers[2])) }) {
		t.Fatalf("layer blob %s of the destroyed sandbox's sleep snapshot is still stored", sleepLayers[2])
	}
	if err := c.DeleteSnapshot(ctxT(t, time.Minute), requested); err != nil {
		t.Fatal(err)
	}
}
