package e2e

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

// liteDiskBytes is the lite instance type's disk size (internal/sandbox/instance.go).
const liteDiskBytes = 2_000_000_000

// loopsFor returns the loop devices whose backing file path contains part.
func loopsFor(part string) []string {
	dirs, _ := filepath.Glob("/sys/block/loop*")
	var out []string
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "loop", "backing_file"))
		if err == nil && strings.Contains(string(b), part) {
			out = append(out, filepath.Base(d))
		}
	}
	return out
}

// waitNoLoops waits up to 10 s for autoclear to detach the loop devices of part.
func waitNoLoops(t *testing.T, part string) {
	t.Helper()
	var left []string
	if !testutil.Poll(t, 50*time.Millisecond, 10*time.Second, func() bool { left = loopsFor(part); return len(left) == 0 }) {
		t.Fatalf("loop devices still attached to %s: %v", part, left)
	}
}

// dataFree returns the data volume's free bytes.
func dataFree(t *testing.T) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Join(d.StateDir, "data"), &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// Each sandbox's disk is a file system of its instance type's size: a lite sandbox that writes
// past 2 GB gets ENOSPC inside, the data volume gives up at most that, the sandbox and its
// neighbour keep working; the disk keeps its data across a stop and start and across a
// SIGKILL of hutchd; destroy leaves no image and no loop device.
func TestDiskQuota(t *testing.T) {
	requireEnv(t)
	const id = "e2e-quota-fill"
	sbDir := filepath.Join(d.StateDir, "data", "sandboxes", id)
	a, err := d.Client().Sandbox(ctxT(t, 5*time.Minute), id, &client.SandboxOptions{InstanceType: "lite"})
	if err != nil {
		t.Fatalf("create: %v\n%s", err, d.LogTail())
	}
	t.Cleanup(func() {
		if err := a.Destroy(ctxT(t, time.Minute)); err != nil && !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
			t.Errorf("destroy: %v", err)
		}
	})
	b := sandbox(t, "e2e-quota-other", &client.SandboxOptions{InstanceType: "lite"})

	fi, err := os.Stat(filepath.Join(sbDir, "disk.img"))
	if err != nil {
		t.Fatalf("no disk image: %v", err)
	}
	if fi.Size() < liteDiskBytes || fi.Size() > liteDiskBytes+1<<20 {
		t.Errorf("disk image is %d bytes, want the lite size %d", fi.Size(), liteDiskBytes)
	}
	fstype, dev := mountAt(t, filepath.Join(sbDir, "disk"))
	if fstype != "ext4" || !strings.HasPrefix(dev, "/dev/loop") {
		t.Fatalf("disk is %q from %q, want ext4 on a loop device", fstype, dev)
	}

	before := dataFree(t)
	// fallocate takes most of the quota at once; dd then writes real blocks past it.
	out := mustExec(t, a, `df -B1 --output=size /workspace | tail -1; free=$(df -B1 --output=avail /workspace | tail -1);
		fallocate -l $((free - 134217728)) /workspace/big 2>&1 && echo allocated;
		dd if=/dev/zero of=/workspace/more bs=1M count=400 conv=fsync 2>&1; echo "dd exit $?"`)
	lines := strings.SplitN(out, "\n", 2)
	size, err := strconv.ParseInt(strings.TrimSpace(lines[0]), 10, 64)
	if err != nil || size > liteDiskBytes || size < liteDiskBytes*9/10 {
		t.Errorf("df in the sandbox shows size %q, want about %d", lines[0], liteDiskBytes)
	}
	if !strings.Contains(out, "allocated") || strings.Contains(out, "dd exit 0") || !strings.Contains(out, "No space left on device") {
		t.Fatalf("writing past the quota: %q (want dd to fail with ENOSPC)", out)
	}
	if lost := before - dataFree(t); lost > liteDiskBytes+64<<20 {
		t.Errorf("the data volume lost %d MiB for a %d MiB quota", lost>>20, liteDiskBytes>>20)
	}
	if got := mustExec(t, a, "echo still here"); got != "still here\n" {
		t.Errorf("exec with the disk full: %q", got)
	}
	if got := mustExec(t, b, "head -c 50M /dev/zero > /workspace/x && sync && ls -s --block-size=M /workspace/x"); !strings.HasPrefix(got, "50M") {
		t.Errorf("the other sandbox's write: %q", got)
	}
	mustExec(t, a, "rm -f /workspace/big /workspace/more && echo kept > /workspace/kept")

	// Stop: no mount, no loop device; start: the data is back.
	if _, err := a.Stop(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if m := mountsUnder(sbDir); len(m) > 0 {
		t.Errorf("stopped sandbox still has mounts %v", m)
	}
	waitNoLoops(t, "/sandboxes/"+id+"/")
	// A snapshot of the stopped sandbox reads its disk, mounted for the while.
	snap, err := a.Snapshot(ctxT(t, 2*time.Minute))
	if err != nil {
		t.Fatalf("snapshot of the stopped sandbox: %v", err)
	}
	t.Cleanup(func() { _ = d.Client().DeleteSnapshot(ctxT(t, time.Minute), snap.ID) })
	if snap.SizeBytes == 0 {
		t.Errorf("snapshot of the stopped sandbox is empty: %+v", snap)
	}
	if m := mountsUnder(sbDir); len(m) > 0 {
		t.Errorf("stopped sandbox has mounts %v after a snapshot", m)
	}
	waitNoLoops(t, "/sandboxes/"+id+"/")
	if got := mustExec(t, a, "cat /workspace/kept"); got != "kept\n" {
		t.Errorf("after stop and start: %q", got)
	}

	// SIGKILL of hutchd: the running sandbox is re-adopted with its disk mounted once.
	d.Kill9()
	if err := d.Start(context.Background()); err != nil {
		t.Fatalf("restart: %v\n%s", err, d.LogTail())
	}
	if got := mustExec(t, a, "echo again >> /workspace/kept && cat /workspace/kept"); got != "kept\nagain\n" {
		t.Errorf("after hutchd was killed: %q", got)
	}
	if n := len(loopsFor("/sandboxes/" + id + "/")); n != 1 {
		t.Errorf("%d loop devices for the disk after the restart, want 1", n)
	}

	if err := a.Destroy(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sbDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("sandbox directory after destroy: %v", err)
	}
	waitNoLoops(t, "/sandboxes/"+id+"/")
}

// restartWith restarts the shared hutchd (SIGTERM: sandboxes keep running) with extra flags,
// and with its usual flags again when the test ends.
func restartWith(t *testing.T, extra ...string) {
	t.Helper()
	base := append([]string(nil), d.Args...)
	d.Stop()
	d.Args = append(append([]string(nil), base...), extra...)
	if err := d.Start(context.Background()); err != nil {
		t.Fatalf("restart with %v: %v\n%s", extra, err, d.LogTail())
	}
	t.Cleanup(func() {
		d.Stop()
		d.Args = base
		if err := d.Start(context.Background()); err != nil {
			t.Fatalf("restart: %v\n%s", err, d.LogTail())
		}
	})
}

// With --disk-quota off new sandboxes get a plain directory (no image, no limit); a sandbox
// that has an image keeps using it; and a sandbox without one (as from before quotas) keeps
// working without one once quotas are on again.
func TestDiskQuotaOff(t *testing.T) {
	requireEnv(t)
	sandboxes := filepath.Join(d.StateDir, "data", "sandboxes")
	withImage := sandbox(t, "e2e-quota-img", &client.SandboxOptions{InstanceType: "lite"})
	mustExec(t, withImage, "echo img > /workspace/f")
	t.Run("off", func(t *testing.T) {
		restartWith(t, "--disk-quota", "off")
		plain := sandbox(t, "e2e-quota-plain", &client.SandboxOptions{InstanceType: "lite"})
		mustExec(t, plain, "echo plain > /workspace/f")
		if _, err := os.Stat(filepath.Join(sandboxes, plain.ID(), "disk.img")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a sandbox made with quotas off has a disk image: %v", err)
		}
		if _, err := os.Stat(filepath.Join(sandboxes, plain.ID(), "upper", "workspace", "f")); err != nil {
			t.Errorf("its writes are not in its directory: %v", err)
		}
		// The sandbox with an image: stopped and started with quotas off, it mounts its image.
		if _, err := withImage.Stop(ctxT(t, time.Minute)); err != nil {
			t.Fatal(err)
		}
		if got := mustExec(t, withImage, "cat /workspace/f"); got != "img\n" {
			t.Errorf("image sandbox with quotas off: %q", got)
		}
		if fstype, _ := mountAt(t, filepath.Join(sandboxes, withImage.ID(), "disk")); fstype != "ext4" {
			t.Errorf("image sandbox with quotas off: disk mount %q, want ext4", fstype)
		}
		// Quotas on again: the plain sandbox keeps its directory through a stop and start.
		restartWith(t, "--disk-quota", "on") // the last flag wins
		if _, err := plain.Stop(ctxT(t, time.Minute)); err != nil {
			t.Fatal(err)
		}
		if got := mustExec(t, plain, "cat /workspace/f"); got != "plain\n" {
			t.Errorf("plain sandbox with quotas on: %q", got)
		}
		if _, err := os.Stat(filepath.Join(sandboxes, plain.ID(), "disk.img")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a sandbox from before quotas got a disk image: %v", err)
		}
	})
}
