package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	if _, err := os.Stat(filepath.Join(data, "sandboxes", sb.ID(), "upper", "workspace", "v", "f100")); err != nil {
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
