package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/client"
)

// mountAt returns the file system type and source of the mount at path, from mountinfo.
func mountAt(t *testing.T, path string) (fstype, source string) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[4] != path {
			continue
		}
		for i, x := range fields {
			if x == "-" && i+2 < len(fields) {
				fstype, source = fields[i+1], fields[i+2]
			}
		}
	}
	return fstype, source
}

// Sandbox disks live on the data volume (an ext4 file system on a loop device), which survives
// hutchd restarts with the sandboxes running on it.
func TestDataVolume(t *testing.T) {
	requireEnv(t)
	data := filepath.Join(d.StateDir, "data")
	fstype, dev := mountAt(t, data)
	if fstype != "ext4" || !strings.HasPrefix(dev, "/dev/loop") {
		t.Fatalf("%s is %q from %q, want ext4 on a loop device", data, fstype, dev)
	}
	sb := sandbox(t, "e2e-volume", &client.SandboxOptions{InstanceType: "lite"})
	mustExec(t, sb, "mkdir -p /workspace/v && for i in $(seq 1 100); do echo $i > /workspace/v/f$i; done")
	if _, err := os.Stat(filepath.Join(data, "sandboxes", sb.ID(), "disk", "upper", "workspace", "v", "f100")); err != nil {
		t.Fatalf("the sandbox's writes are not on the volume: %v", err)
	}
	d.Stop()
	if err := d.Start(context.Background()); err != nil {
		t.Fatalf("restart: %v\n%s", err, d.LogTail())
	}
	if _, dev2 := mountAt(t, data); dev2 != dev {
		t.Errorf("after a restart the volume is on %q, was %q (want the mount reused)", dev2, dev)
	}
	if n := len(mountsUnder(data)); n == 0 {
		t.Error("no sandbox mounts below the volume after a restart")
	}
	if got := mustExec(t, sb, "cat /workspace/v/f100"); got != "100\n" {
		t.Errorf("after a restart: %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := sb.Sleep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, sb, "cat /workspace/v/f1"); got != "1\n" {
		t.Errorf("after sleep and wake: %q", got)
	}
}

// A sandbox that fills its disk (its quota; without quotas, the data volume) gets ENOSPC;
// hutchd, its API and other sandboxes keep working (reads, execs), the host's free space does
// not move (the volume's space was reserved when it was made), and everything recovers once
// the space is freed.
func TestDataVolumeFull(t *testing.T) {
	requireEnv(t)
	a := sandbox(t, "e2e-volume-fill", &client.SandboxOptions{InstanceType: "lite"})
	b := sandbox(t, "e2e-volume-other", &client.SandboxOptions{InstanceType: "lite"})
	mustExec(t, b, "echo kept > /workspace/kept")
	var before unix.Statfs_t
	if err := unix.Statfs(d.StateDir, &before); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = a.Exec(ctx, "rm -f /workspace/fill /workspace/more", nil)
	})
	// fallocate takes the free space at once (no data written); then a write must fail.
	out := mustExec(t, a, `free=$(df -B1 --output=avail /workspace | tail -1); echo "free $free"; fallocate -l $((free - 1048576)) /workspace/fill 2>&1 && echo filled;
		{ head -c 67108864 /dev/zero > /workspace/more; } 2>&1; echo "write exit $?"`)
	if !strings.Contains(out, "filled") || strings.Contains(out, "write exit 0") || !strings.Contains(out, "No space left") {
		t.Fatalf("filling the volume: %q (want the fill to succeed and the next write to fail with ENOSPC)", out)
	}
	var after unix.Statfs_t
	if err := unix.Statfs(d.StateDir, &after); err != nil {
		t.Fatal(err)
	}
	// The host file system did not lose the volume's size (allow 256 MiB of other activity).
	if lost := (int64(before.Bavail) - int64(after.Bavail)) * int64(before.Bsize); lost > 256<<20 {
		t.Errorf("the host's free space dropped by %d MiB while the volume filled", lost>>20)
	}
	if got := mustExec(t, b, "cat /workspace/kept"); got != "kept\n" {
		t.Errorf("other sandbox, volume full: %q", got)
	}
	if _, err := d.Client().ListSandboxes(ctxT(t, time.Minute)); err != nil {
		t.Errorf("API with the volume full: %v", err)
	}
	mustExec(t, a, "rm -f /workspace/fill /workspace/more")
	mustExec(t, b, "echo again > /workspace/again")
	if got := mustExec(t, b, "cat /workspace/again"); got != "again\n" {
		t.Errorf("after freeing the volume: %q", got)
	}
}
