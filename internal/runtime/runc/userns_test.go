package runc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/idmap"
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// TestUserNSOwnedByRange: a container with an ID range runs in a user namespace owned by the
// range's root (where the kernel charges its per-user counters), in the network namespace it
// was given (also for runc exec), with the spec's rlimits, and nothing of this process holds
// the namespace once Start has returned.
func TestUserNSOwnedByRange(t *testing.T) {
	e := newEnv(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2 not installed")
	}
	ctx := ctxT(t)
	id := newID(t)
	nsName := "hutch-" + id
	if out, err := exec.Command("ip", "netns", "add", nsName).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", nsName).Run() })
	nsPath := "/var/run/netns/" + nsName
	var nsStat unix.Stat_t
	if err := unix.Stat(nsPath, &nsStat); err != nil {
		t.Fatal(err)
	}
	spec := e.spec(t, id)
	// runc's init opens the root from inside the namespace, as the range's root.
	for p := spec.RootFS; p != "/"; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(p, fi.Mode().Perm()|0o011); err != nil {
				t.Fatal(err)
			}
		}
	}
	idm := idmap.Map{Base: 1<<20 + 50<<16, Size: 1 << 16}
	spec.IDMap, spec.NetNSPath, spec.Cwd = idm, nsPath, "/"
	st, err := e.rt.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(st.Pid) + "/ns/user")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if owner, err := idmap.Owner(ns); err != nil || owner != int(idm.Base) {
		t.Errorf("user namespace owner %d (%v), want the range's root %d", owner, err, idm.Base)
	}
	var userStat unix.Stat_t
	if err := unix.Fstat(int(ns.Fd()), &userStat); err != nil {
		t.Fatal(err)
	}
	// Start's descriptor is closed: the container's processes alone keep the namespace.
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if n, _ := strconv.Atoi(fd.Name()); n == int(ns.Fd()) {
			continue
		}
		if l, _ := os.Readlink("/proc/self/fd/" + fd.Name()); l == "user:["+strconv.FormatUint(userStat.Ino, 10)+"]" {
			t.Errorf("fd %s of this process still holds the container's user namespace", fd.Name())
		}
	}
	host, err := ocispec.ProbeHost()
	if err != nil {
		t.Fatal(err)
	}
	limits, err := os.ReadFile("/proc/" + strconv.Itoa(st.Pid) + "/limits")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uint64{"Max open files": host.NoFile, "Max msgqueue size": host.MsgQueue, "Max pending signals": host.SigPending} {
		found := false
		for _, line := range strings.Split(string(limits), "\n") {
			if rest, ok := strings.CutPrefix(line, name); ok {
				f := strings.Fields(rest)
				found = len(f) >= 2 && f[0] == strconv.FormatUint(want, 10) && f[1] == f[0]
			}
		}
		if !found {
			t.Errorf("PID 1's %s is not %d (soft and hard):\n%s", name, want, limits)
		}
	}
	for _, c := range []struct{ what, path string }{{"PID 1", "/proc/" + strconv.Itoa(st.Pid) + "/ns/net"}} {
		var s unix.Stat_t
		if err := unix.Stat(c.path, &s); err != nil || s.Ino != nsStat.Ino {
			t.Errorf("%s is not in the given network namespace (%v)", c.what, err)
		}
	}
	if code, out := e.exec(t, id, "stat", "-L", "-c", "%i", "/proc/self/ns/net"); code != 0 || strings.TrimSpace(out) != strconv.FormatUint(nsStat.Ino, 10) {
		t.Errorf("runc exec's network namespace: exit %d, %q; want inode %d", code, out, nsStat.Ino)
	}
	if code, out := e.exec(t, id, "cat", "/proc/self/uid_map"); code != 0 || strings.Join(strings.Fields(out), " ") != "0 "+strconv.Itoa(int(idm.Base))+" 65536" {
		t.Errorf("uid_map inside: exit %d, %q", code, out)
	}
	if err := e.rt.Delete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	e.AssertGone(t, id)
}
