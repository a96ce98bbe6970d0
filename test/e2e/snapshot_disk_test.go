package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/daemontest"
	"github.com/hutchdev/hutch/internal/testutil"
)

// TestSnapshotSparseFile: a 20 GiB sparse file holding a few bytes costs its data, not its
// apparent size: the snapshot's layer is small, and a sandbox from it has the file with the
// same size, the same bytes at the data offsets, and holes (little allocated).
func TestSnapshotSparseFile(t *testing.T) {
	requireEnv(t)
	src := sandbox(t, "e2e-snap-sparse", nil)
	const size = 20 << 30
	mustExec(t, src, fmt.Sprintf(`set -e; mkdir -p /workspace/sp && cd /workspace/sp
truncate -s %d huge
printf HEAD | dd of=huge conv=notrunc status=none
printf MIDDLE | dd of=huge bs=1 seek=%d conv=notrunc status=none
printf TAIL | dd of=huge bs=1 seek=%d conv=notrunc status=none`, size, size/2+12345, size-4))
	snap, err := src.Snapshot(ctxT(t, 10*time.Minute))
	if err != nil {
		t.Fatalf("Snapshot: %v\n%s", err, d.LogTail())
	}
	if len(snap.Layers) != 1 || snap.Layers[0].SizeBytes > 64<<20 {
		t.Fatalf("snapshot layers = %+v; want one layer of the data, not of 20 GiB of holes", snap.Layers)
	}
	t.Logf("20 GiB sparse file: layer %d bytes tar, %d compressed", snap.Layers[0].SizeBytes, snap.Layers[0].CompressedBytes)
	cp := sandbox(t, "e2e-snap-sparse-cp", &client.SandboxOptions{Snapshot: snap.ID})
	got := mustExec(t, cp, fmt.Sprintf(`cd /workspace/sp && stat -c %%s huge &&
dd if=huge bs=1 count=4 status=none && echo &&
dd if=huge bs=1 skip=%d count=6 status=none && echo &&
dd if=huge bs=1 skip=%d count=4 status=none && echo &&
dd if=huge bs=1 skip=%d count=16 status=none | od -An -tx1 | tr -d ' \n' && echo &&
du -k huge | cut -f1`, size/2+12345, size-4, size/4))
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 6 || lines[0] != strconv.Itoa(size) || lines[1] != "HEAD" || lines[2] != "MIDDLE" || lines[3] != "TAIL" ||
		lines[4] != strings.Repeat("00", 16) {
		t.Fatalf("restored file: %q", got)
	}
	if kb, err := strconv.Atoi(lines[5]); err != nil || kb > 10<<10 {
		t.Errorf("restored file allocates %s KiB; want it sparse", lines[5])
	}
}

// freezeState reports whether sandbox id's cgroup is frozen (cgroup v1 freezer or v2), and
// whether it could tell.
func freezeState(id string) (frozen, known bool) { return freezeStateIn(cgroupDir, id) }

// freezeStateIn is freezeState for a daemon with the cgroup parent parent.
func freezeStateIn(parent, id string) (frozen, known bool) {
	cgroupDir := parent
	if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/freezer", cgroupDir, id, "freezer.state")); err == nil {
		s := strings.TrimSpace(string(b))
		return s == "FROZEN" || s == "FREEZING", true
	}
	if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", cgroupDir, id, "cgroup.events")); err == nil {
		return strings.Contains(string(b), "frozen 1"), true
	}
	return false, false
}

// waitFrozen waits (up to a minute) until sandbox id is frozen, or done is closed.
func waitFrozen(t *testing.T, id string, done <-chan struct{}) {
	t.Helper()
	if !testutil.Poll(t, 2*time.Millisecond, time.Minute, func() bool {
		frozen, known := freezeState(id)
		if !known {
			t.Skip("no freezer state to watch for sandbox " + id)
		}
		if frozen {
			return true
		}
		select {
		case <-done:
			t.Fatal("the snapshot ended before the sandbox was seen frozen")
		default:
		}
		return false
	}) {
		t.Fatal("the sandbox was never frozen for the snapshot")
	}
}

// hutchdReadBytes is what the test hutchd has read so far (rchar: files and sockets alike).
func hutchdReadBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", d.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no rchar in /proc/<hutchd>/io")
	return 0
}

// TestSnapshotCancelAndDestroy: a snapshot of a sandbox with gigabytes of real data to read
// (which no hole skipping shortens) stops when its client gives up, and the sandbox is thawed
// without the rest of the disk being read; and a destroy during such a snapshot cancels it
// and succeeds, instead of waiting behind it.
func TestSnapshotCancelAndDestroy(t *testing.T) {
	requireEnv(t)
	skipOnGVisor(t, "watches the runc sandbox's cgroup freezer")
	c := d.Client()
	sb, err := c.Sandbox(ctxT(t, 5*time.Minute), "e2e-snap-cancel", &client.SandboxOptions{InstanceType: "standard-2"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Destroy(ctxT(t, time.Minute)); err != nil && !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
			t.Errorf("Destroy: %v", err)
		}
	})
	const dataBytes = 4 << 30
	mustExec(t, sb, fmt.Sprintf("mkdir -p /workspace/data && yes hutch-snapshot-data | head -c %d > /workspace/data/blob && sync", dataBytes))

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { _, err := sb.Snapshot(ctx); done <- err }()
		stopped := make(chan struct{})
		waitFrozen(t, sb.ID(), stopped)
		before := hutchdReadBytes(t)
		// Cancel once the capture is reading the disk: its copy loop must notice.
		if !testutil.Poll(t, time.Millisecond, time.Minute, func() bool { return hutchdReadBytes(t)-before >= 256<<20 }) {
			t.Fatal("the capture never read the disk")
		}
		cancel()
		if err := <-done; err == nil {
			t.Fatal("the cancelled snapshot succeeded")
		}
		// Thawed: the sandbox runs commands again, within a generous deadline.
		if !testutil.Poll(t, 5*time.Millisecond, 3*time.Minute, func() bool { frozen, _ := freezeState(sb.ID()); return !frozen }) {
			t.Fatalf("the sandbox is still frozen after its snapshot was cancelled\n%s", d.LogTail())
		}
		read := hutchdReadBytes(t) - before
		t.Logf("hutchd read %d bytes between the freeze and the thaw (the disk holds %d)", read, int64(dataBytes))
		if read >= dataBytes/2 {
			t.Errorf("hutchd read %d bytes of the %d-byte disk after the client cancelled: the capture went on", read, int64(dataBytes))
		}
		if got := mustExec(t, sb, "echo alive"); got != "alive\n" {
			t.Errorf("after the cancel: %q", got)
		}
		if list, err := c.ListSnapshots(ctxT(t, time.Minute), sb.ID()); err != nil || len(list) != 0 {
			t.Errorf("snapshots after the cancel = %d, %v; want none", len(list), err)
		}
		if left, _ := filepath.Glob(filepath.Join(d.StateDir, "data", "layers", ".layer-*")); len(left) != 0 {
			t.Errorf("the cancelled capture left %v", left)
		}
	})

	t.Run("destroy", func(t *testing.T) {
		done := make(chan error, 1)
		stopped := make(chan struct{})
		ctx := ctxT(t, 10*time.Minute)
		go func() {
			_, err := sb.Snapshot(ctx)
			done <- err
			close(stopped)
		}()
		waitFrozen(t, sb.ID(), stopped)
		if err := sb.Destroy(ctxT(t, 3*time.Minute)); err != nil {
			t.Fatalf("Destroy during a snapshot: %v\n%s", err, d.LogTail())
		}
		err := <-done
		if err == nil {
			t.Fatal("the snapshot finished before the destroy: it was waited for, not cancelled")
		}
		if !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
			t.Errorf("the snapshot cut by the destroy failed with %v; want SANDBOX_NOT_FOUND", err)
		}
		if _, err := c.GetSandbox(ctxT(t, time.Minute), sb.ID()); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
			t.Errorf("GetSandbox after destroy = %v", err)
		}
		if left, _ := filepath.Glob(filepath.Join(d.StateDir, "data", "layers", ".layer-*")); len(left) != 0 {
			t.Errorf("the cancelled capture left %v", left)
		}
	})
}

// TestSnapshotBounds runs a hutchd of its own with a 1 s frozen-time bound and a 3 MB snapshot
// quota per sandbox: a capture that needs longer than the bound (4 GiB of real data to read)
// fails with SNAPSHOT_FROZEN_TOO_LONG and leaves the sandbox running; a snapshot past the
// quota is refused with SNAPSHOT_QUOTA_EXCEEDED and stores nothing.
func TestSnapshotBounds(t *testing.T) {
	requireEnv(t)
	skipOnGVisor(t, "the e2e daemon of its own runs runc")
	state, err := os.MkdirTemp("", "hutch-e2e-snapbound-")
	if err != nil {
		t.Fatal(err)
	}
	dm, err := daemontest.New(bins, state, filepath.Join(state, "hutchd.log"))
	if err != nil {
		t.Fatal(err)
	}
	dm.Args = []string{
		"--images-dir", imagesDir(),
		"--if-prefix", "hsq", "--netns-prefix", "hutchsq-", "--nft-table", "hutchsq", "--cgroup-parent", "hutchsq",
		"--subnet", "10.82.0.0/16", "--dns-port", "34053", "--http-port", "34001", "--tls-port", "34002",
		"--preview-listen", "off", "--data-volume", "off", "--disk-quota", "off", "--log-level", "debug",
		"--snapshot-max-frozen", "1s", "--snapshot-quota-bytes", "3000000",
	}
	if err := dm.Start(context.Background()); err != nil {
		t.Fatalf("start hutchd: %v\n%s", err, dm.LogTail())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := dm.DestroyAll(ctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		dm.Stop()
		cleanupState(dm)
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/hutchsq")
		for _, dir := range append(dirs, "/sys/fs/cgroup/hutchsq") {
			os.Remove(dir)
		}
	})
	c := dm.Client()

	t.Run("quota", func(t *testing.T) {
		sb, err := c.Sandbox(ctxT(t, 5*time.Minute), "e2e-snap-quota", nil)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, sb, "mkdir -p /workspace/q && head -c 2000000 /dev/urandom > /workspace/q/a")
		first, err := sb.Snapshot(ctxT(t, 5*time.Minute))
		if err != nil {
			t.Fatalf("first snapshot (2 MB, under the 3 MB quota): %v", err)
		}
		// The second layer holds both files (4 MB, incompressible): past the quota.
		mustExec(t, sb, "head -c 2000000 /dev/urandom > /workspace/q/b")
		_, err = sb.Snapshot(ctxT(t, 5*time.Minute))
		if !errdefs.IsCode(err, errdefs.CodeSnapshotQuota) {
			t.Fatalf("snapshot past the quota = %v; want SNAPSHOT_QUOTA_EXCEEDED", err)
		}
		list, err := c.ListSnapshots(ctxT(t, time.Minute), sb.ID())
		if err != nil || len(list) != 1 || list[0].ID != first.ID {
			t.Errorf("snapshots after the refusal = %+v, %v; want only %s", list, err, first.ID)
		}
		layers, _ := filepath.Glob(filepath.Join(state, "blobs", "layers", "*.tar.zst"))
		if len(layers) != 1 {
			t.Errorf("layer blobs after the refusal: %v; want the first snapshot's alone", layers)
		}
	})

	t.Run("max frozen", func(t *testing.T) {
		sb, err := c.Sandbox(ctxT(t, 5*time.Minute), "e2e-snap-frozen", &client.SandboxOptions{InstanceType: "standard-2"})
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, sb, "mkdir -p /workspace/data && yes hutch-snapshot-data | head -c 4294967296 > /workspace/data/blob && sync")
		_, err = sb.Snapshot(ctxT(t, 10*time.Minute))
		if !errdefs.IsCode(err, errdefs.CodeSnapshotFrozenTooLong) {
			t.Fatalf("snapshot of 4 GiB with a 1 s bound = %v; want SNAPSHOT_FROZEN_TOO_LONG\n%s", err, dm.LogTail())
		}
		if frozen, _ := freezeStateIn("hutchsq", sb.ID()); frozen {
			t.Error("the sandbox is still frozen after the bound")
		}
		if got := mustExec(t, sb, "echo alive"); got != "alive\n" {
			t.Errorf("after the bound: %q", got)
		}
		if left, _ := filepath.Glob(filepath.Join(state, "layers", ".layer-*")); len(left) != 0 {
			t.Errorf("the abandoned capture left %v", left)
		}
	})
}
