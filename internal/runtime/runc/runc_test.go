package runc_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/rootfs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
	"github.com/hutchdev/hutch/internal/runtime/runc"
	"github.com/hutchdev/hutch/internal/runtime/runtimetest"
)

// harness runs runc under the conformance suite; newEnv gives the package's own tests the
// same environment.
var harness = runtimetest.Harness{IDPrefix: "rt-test-", New: func(t *testing.T, dir string) runtimetest.Runtime {
	t.Helper()
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("runc not installed")
	}
	rt, err := runc.New(runc.Config{Root: filepath.Join(dir, "runc"), BundleDir: filepath.Join(dir, "bundles"), CgroupParent: "hutchrt"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return rt
}}

// TestConformance runs the runtime contract's suite (internal/runtime/runtimetest) on runc.
func TestConformance(t *testing.T) { runtimetest.Conformance(t, harness) }

// env is one test's runtime, image and overlay scratch space.
type env struct {
	*runtimetest.Env
	rt    *runc.Runtime
	image string // image rootfs (overlay lower)
	dir   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := runtimetest.NewEnv(t, harness)
	return &env{Env: e, rt: e.RT.(*runc.Runtime), image: e.Image, dir: e.Dir}
}

func newID(t *testing.T) string { return runtimetest.NewID(harness.IDPrefix) }

// spec mounts a fresh overlay for id and returns a spec running a long-lived PID 1.
func (e *env) spec(t *testing.T, id string) runtime.Spec { t.Helper(); return e.Spec(t, id) }

func ctxT(t *testing.T) context.Context { return runtimetest.Ctx(t) }

func (e *env) exec(t *testing.T, id string, args ...string) (int, string) {
	t.Helper()
	return e.Exec(t, id, args...)
}

func capMask(names []string) uint64 {
	nums := map[string]uint{
		"CAP_AUDIT_WRITE": unix.CAP_AUDIT_WRITE, "CAP_CHOWN": unix.CAP_CHOWN, "CAP_DAC_OVERRIDE": unix.CAP_DAC_OVERRIDE,
		"CAP_FOWNER": unix.CAP_FOWNER, "CAP_FSETID": unix.CAP_FSETID, "CAP_KILL": unix.CAP_KILL, "CAP_MKNOD": unix.CAP_MKNOD,
		"CAP_NET_BIND_SERVICE": unix.CAP_NET_BIND_SERVICE, "CAP_SETFCAP": unix.CAP_SETFCAP, "CAP_SETGID": unix.CAP_SETGID,
		"CAP_SETPCAP": unix.CAP_SETPCAP, "CAP_SETUID": unix.CAP_SETUID, "CAP_SYS_CHROOT": unix.CAP_SYS_CHROOT,
	}
	var m uint64
	for _, n := range names {
		bit, ok := nums[n]
		if !ok {
			panic("unknown capability " + n)
		}
		m |= 1 << bit
	}
	return m
}

// TestIsolation checks what runc's containers may and may not do (capabilities, seccomp,
// namespaces, limits) and that the image's tools run; the contract's lifecycle is
// TestConformance's.
func TestIsolation(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	id := newID(t)
	spec := e.spec(t, id)
	marker := filepath.Join(e.dir, "host-marker")
	if err := os.WriteFile(marker, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}

	// Host-side cgroup limits.
	if runtimeIsV1() {
		for file, want := range map[string]string{
			"memory/hutchrt/" + id + "/memory.limit_in_bytes": strconv.Itoa(256 << 20),
			"pids/hutchrt/" + id + "/pids.max":                "64",
			"cpu/hutchrt/" + id + "/cpu.cfs_quota_us":         "50000",
			"cpu/hutchrt/" + id + "/cpu.shares":               "512",
		} {
			b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", file))
			if err != nil || strings.TrimSpace(string(b)) != want {
				t.Errorf("%s = %q, %v; want %s", file, b, err, want)
			}
		}
	}

	wantCaps := fmt.Sprintf("%016x", capMask(ocispec.Capabilities))
	checks := []struct {
		name     string
		args     []string
		wantCode int
		want     string // substring of the output
	}{
		{"hostname", []string{"hostname"}, 0, id},
		{"cwd", []string{"pwd"}, 0, "/workspace"},
		{"workspace", []string{"test", "-d", "/workspace"}, 0, ""},
		{"write", []string{"sh", "-c", "echo from-container > /workspace/hello.txt"}, 0, ""},
		{"capabilities", []string{"grep", "CapEff", "/proc/self/status"}, 0, wantCaps},
		{"bounding set", []string{"grep", "CapBnd", "/proc/self/status"}, 0, wantCaps},
		{"no_new_privs", []string{"grep", "NoNewPrivs", "/proc/self/status"}, 0, "NoNewPrivs:\t1"},
		{"seccomp", []string{"grep", "^Seccomp:", "/proc/self/status"}, 0, "Seccomp:\t2"},
		{"unshare denied", []string{"unshare", "-r", "true"}, 1, ""},
		{"user namespace via clone denied", []string{"python3", "-c", cloneScript, "0x10000000"}, 0, "errno 1"},
		{"network namespace via clone denied", []string{"python3", "-c", cloneScript, "0x40000000"}, 0, "errno 1"},
		{"plain clone allowed", []string{"python3", "-c", cloneScript, "0"}, 0, "created"},
		{"clone3 gives ENOSYS", []string{"python3", "-c", "import ctypes; l = ctypes.CDLL(None, use_errno=True); print(l.syscall(435, 0, 0), 'errno', ctypes.get_errno())"}, 0, "errno 38"},
		{"mount denied", []string{"mount", "-t", "tmpfs", "none", "/mnt"}, 32, ""},
		{"host marker invisible", []string{"sh", "-c", "test -e " + marker + " || test -e /tmp/" + filepath.Base(marker) + " && echo visible || echo invisible"}, 0, "invisible"},
		{"personality query allowed", []string{"setarch", "--list"}, 0, "x86_64"},
		{"personality ADDR_NO_RANDOMIZE denied", []string{"setarch", "-R", "true"}, 1, "Operation not permitted"},
		{"ipv6 disabled", []string{"cat", "/proc/sys/net/ipv6/conf/all/disable_ipv6"}, 0, "1"},
		{"nofile", []string{"sh", "-c", "ulimit -Hn"}, 0, strconv.FormatUint(min(hostNofile(t), 1<<16), 10)},
		{"python stack", []string{"python3", "-c", "import numpy, pandas, matplotlib, IPython; print('ok')"}, 0, "ok"},
		{"node", []string{"node", "-e", "console.log(process.version)"}, 0, "v"},
		{"npm", []string{"npm", "--version"}, 0, "."},
		{"git", []string{"git", "--version"}, 0, "git version"},
		{"curl", []string{"curl", "--version"}, 0, "curl"},
		{"bash", []string{"bash", "-c", "echo $((6*7))"}, 0, "42"},
		{"memory limit kills", []string{"python3", "-c", "x = b'\\x01' * (600 << 20); print('survived')"}, 137, ""},
		{"pids limit holds", []string{"python3", "-c", pidsScript}, 0, "EAGAIN"},
		{"container survives", []string{"true"}, 0, ""},
	}
	for _, c := range checks {
		code, out := e.exec(t, id, c.args...)
		if code != c.wantCode || !strings.Contains(out, c.want) {
			t.Errorf("%s: %v: exit %d, output %q; want exit %d containing %q", c.name, c.args, code, out, c.wantCode, c.want)
		}
	}
	if err := e.rt.Delete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	e.AssertGone(t, id)
}

// cloneScript calls clone(2) directly with SIGCHLD|argv[1] as flags.
const cloneScript = `
import ctypes, os, platform, sys
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": 56, "aarch64": 220}[platform.machine()]
r = libc.syscall(nr, ctypes.c_ulong(int(sys.argv[1], 16) | 17), 0, 0, 0, 0)
if r == 0:
    os._exit(0)
if r > 0:
    os.waitpid(r, 0)
    print("created")
else:
    print("errno", ctypes.get_errno())
`

// pidsScript forks until the pids limit stops it, reports how far it got, and cleans up.
const pidsScript = `
import os, signal, time
pids = []
try:
    for _ in range(200):
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        pids.append(pid)
    print("no limit", len(pids))
except OSError as e:
    print("EAGAIN" if e.errno == 11 else e, len(pids))
for p in pids:
    os.kill(p, signal.SIGKILL)
for p in pids:
    os.waitpid(p, 0)
`

func hostNofile(t *testing.T) uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	return rl.Max
}

func runtimeIsV1() bool {
	var st unix.Statfs_t
	return unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type != unix.CGROUP2_SUPER_MAGIC
}

func TestRunOnce(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	id := newID(t)
	spec := e.spec(t, id)
	spec.Args = []string{"sh", "-c", "echo hello from $(hostname); exit 3"}
	code, err := e.rt.RunOnce(ctx, spec)
	if err != nil || code != 3 {
		t.Fatalf("RunOnce = %d, %v; want 3", code, err)
	}
	if b, err := os.ReadFile(spec.LogPath); err != nil || string(b) != "hello from "+id+"\n" {
		t.Errorf("log = %q, %v", b, err)
	}
	e.AssertGone(t, id)
	if err := rootfs.Unmount(spec.RootFS); err != nil {
		t.Fatal(err)
	}
}

func TestJoinNetNSAndBindMounts(t *testing.T) {
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
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", nsName).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete: %v: %s", err, out)
		}
	})
	nsPath := "/var/run/netns/" + nsName
	var nsStat unix.Stat_t
	if err := unix.Stat(nsPath, &nsStat); err != nil {
		t.Fatal(err)
	}

	shared := filepath.Join(e.dir, "shared")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared, "ro.txt"), []byte("read only"), 0o644); err != nil {
		t.Fatal(err)
	}
	resolv := filepath.Join(e.dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 192.0.2.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := e.spec(t, id)
	spec.NetNSPath = nsPath
	spec.Hostname = "custom-host"
	spec.Mounts = []runtime.Mount{
		{Source: shared, Destination: "/opt/shared", ReadOnly: true},
		{Source: resolv, Destination: "/etc/resolv.conf"},
	}
	if _, err := e.rt.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"joined netns", []string{"stat", "-L", "-c", "%i", "/proc/self/ns/net"}, 0, strconv.FormatUint(nsStat.Ino, 10)},
		{"hostname", []string{"hostname"}, 0, "custom-host"},
		{"ro bind readable", []string{"cat", "/opt/shared/ro.txt"}, 0, "read only"},
		{"ro bind not writable", []string{"sh", "-c", "echo x > /opt/shared/new"}, 2, "Read-only file system"},
		{"file bind", []string{"cat", "/etc/resolv.conf"}, 0, "192.0.2.53"},
		{"file bind writable", []string{"sh", "-c", "echo '# edited' >> /etc/resolv.conf"}, 0, ""},
	} {
		code, out := e.exec(t, id, c.args...)
		if code != c.wantCode || !strings.Contains(out, c.want) {
			t.Errorf("%s: %v: exit %d, output %q; want exit %d containing %q", c.name, c.args, code, out, c.wantCode, c.want)
		}
	}
	if b, _ := os.ReadFile(resolv); !strings.Contains(string(b), "# edited") {
		t.Errorf("rw file bind did not write through: %q", b)
	}
	if err := e.rt.Delete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	e.AssertGone(t, id)
	if err := rootfs.Unmount(spec.RootFS); err != nil {
		t.Fatal(err)
	}
}
