package runc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/rootfs"
	"github.com/hutchdev/hutch/internal/runtime"
)

// The cgroup v1 freezer can only freeze a task when it runs; a container throttled hard by its
// CPU quota (the "lite" instance type: 62 millicores) with busy processes made `runc pause`
// fail with "unable to freeze" in CI. Pause must still succeed.
func TestPauseThrottled(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	id := newID(t)
	spec := e.spec(t, id)
	spec.Resources.MilliCPU = 62
	spec.Args = []string{"sh", "-c", "for i in 1 2 3 4 5 6 7 8; do (while :; do :; done) & done; while :; do head -c 1048576 /dev/urandom > /dev/null; done"}
	if _, err := e.rt.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = e.rt.Delete(ctx, id, true)
		_ = rootfs.Unmount(spec.RootFS)
	}()
	time.Sleep(500 * time.Millisecond)
	for i := range 20 {
		if err := e.rt.Pause(ctx, id); err != nil {
			t.Fatalf("pause %d: %v", i, err)
		}
		if st, err := e.rt.State(ctx, id); err != nil || st.Status != runtime.StatusPaused {
			t.Fatalf("state after Pause %d = %+v, %v", i, st, err)
		}
		if err := e.rt.Resume(ctx, id); err != nil {
			t.Fatalf("resume %d: %v", i, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The quota is the container's own again (Pause may lift it while it freezes).
	checkQuota(t, id, "after pauses")
}

// checkQuota checks that container id (started with 62 millicores) has its own CPU quota.
func checkQuota(t *testing.T, id, when string) {
	t.Helper()
	quota := map[string]string{
		"/sys/fs/cgroup/cpu,cpuacct/hutchrt/" + id + "/cpu.cfs_quota_us": "6200",
		"/sys/fs/cgroup/cpu/hutchrt/" + id + "/cpu.cfs_quota_us":         "6200",
		"/sys/fs/cgroup/hutchrt/" + id + "/cpu.max":                      "6200 100000",
	}
	checked := false
	for path, want := range quota {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		checked = true
		if got := strings.TrimSpace(string(b)); got != want {
			t.Errorf("%s = %q %s, want %q", path, got, when, want)
		}
	}
	if !checked {
		t.Error("found no CPU quota file of the container to check")
	}
}

// A hutchd killed inside Pause while the CPU quota is lifted leaves the container with none;
// the restarted hutchd's Adopt must put the container's own quota back.
func TestAdoptRestoresCPUQuota(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	id := newID(t)
	spec := e.spec(t, id)
	spec.Resources.MilliCPU = 62
	spec.Args = []string{"sleep", "1000"}
	if _, err := e.rt.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = e.rt.Delete(ctx, id, true)
		_ = rootfs.Unmount(spec.RootFS)
	}()
	// What Pause does before it freezes a throttled container, and a kill then leaves.
	if out, err := exec.Command("runc", "--root", filepath.Join(e.dir, "runc"), "update", "--cpu-quota", "-1", id).CombinedOutput(); err != nil {
		t.Fatalf("runc update: %v: %s", err, out)
	}
	e.rt.Adopt(id)
	checkQuota(t, id, "after Adopt")
}
