package runc_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/image/imagetest"
	"github.com/hutchdev/hutch/internal/rootfs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
	"github.com/hutchdev/hutch/internal/runtime/runc"
)

// env is one test's runtime, image and overlay scratch space.
type env struct {
	rt    *runc.Runtime
	image string // image rootfs (overlay lower)
	dir   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containers")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("runc not installed")
	}
	img := imagetest.Default(t)
	dir := t.TempDir()
	rt, err := runc.New(runc.Config{Root: filepath.Join(dir, "runc"), BundleDir: filepath.Join(dir, "bundles"), CgroupParent: "hutchrt"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{rt: rt, image: img.RootFS, dir: dir}
	t.Cleanup(func() {
		// Whatever a failed test left: containers first, then mounts.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		states, _ := rt.List(ctx)
		for _, s := range states {
			if err := rt.Delete(ctx, s.ID, true); err != nil {
				t.Errorf("cleanup delete %s: %v", s.ID, err)
			}
		}
		mounts, _ := rootfs.ListMounts(dir)
		for _, m := range mounts {
			if err := rootfs.Unmount(m); err != nil {
				t.Errorf("cleanup unmount %s: %v", m, err)
			}
		}
	})
	return e
}

func newID(t *testing.T) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "rt-test-" + hex.EncodeToString(b)
}

// spec mounts a fresh overlay for id and returns a spec running a long-lived PID 1.
func (e *env) spec(t *testing.T, id string) runtime.Spec {
	t.Helper()
	base := filepath.Join(e.dir, id)
	merged := filepath.Join(base, "merged")
	if err := rootfs.Mount(e.image, filepath.Join(base, "upper"), filepath.Join(base, "work"), merged); err != nil {
		t.Fatal(err)
	}
	return runtime.Spec{
		ID:        id,
		RootFS:    merged,
		Args:      []string{"sleep", "infinity"},
		Env:       []string{"HOME=/root", "LANG=C.UTF-8"},
		Cwd:       "/workspace",
		Resources: runtime.Resources{MilliCPU: 500, MemoryBytes: 256 << 20, Pids: 64},
		LogPath:   filepath.Join(base, "console.log"),
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) exec(t *testing.T, id string, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code, err := e.rt.Exec(ctxT(t), id, args, &out, &out)
	if err != nil {
		t.Fatalf("exec %v: %v", args, err)
	}
	return code, out.String()
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

func TestContainerLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	id := newID(t)
	spec := e.spec(t, id)
	marker := filepath.Join(e.dir, "host-marker")
	if err := os.WriteFile(marker, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}

	st, err := e.rt.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != id || st.Status != runtime.StatusRunning || st.Pid <= 0 {
		t.Fatalf("Start = %+v", st)
	}
	if _, err := e.rt.Start(ctx, spec); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("second Start: %v, want ErrAlreadyExists", err)
	}
	if got, err := e.rt.State(ctx, id); err != nil || got != st {
		t.Fatalf("State = %+v, %v; want %+v", got, err, st)
	}
	list, err := e.rt.List(ctx)
	if err != nil || len(list) != 1 || list[0] != st {
		t.Fatalf("List = %+v, %v", list, err)
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
	upperFile := filepath.Join(e.dir, id, "upper", "workspace", "hello.txt")
	if b, err := os.ReadFile(upperFile); err != nil || string(b) != "from-container\n" {
		t.Errorf("upper dir: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(e.image, "workspace", "hello.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("write reached the image: %v", err)
	}

	if err := e.rt.Delete(ctx, id, false); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Delete of running container without force: %v, want ErrFailedPrecondition", err)
	}
	if err := e.rt.Kill(ctx, id, syscall.SIGKILL, true); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e.rt, id, runtime.StatusStopped)
	if err := e.rt.Delete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	assertGone(t, e.rt, id)
	if err := e.rt.Delete(ctx, id, true); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	if err := rootfs.Unmount(spec.RootFS); err != nil {
		t.Fatal(err)
	}
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

func waitStatus(t *testing.T, rt *runc.Runtime, id string, want runtime.Status) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := rt.State(context.Background(), id)
		if err == nil && st.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("state of %s = %+v, %v; want %s", id, st, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func assertGone(t *testing.T, rt *runc.Runtime, id string) {
	t.Helper()
	if _, err := rt.State(context.Background(), id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("State after Delete: %v, want ErrNotFound", err)
	}
	for _, d := range rt.CgroupDirs(id) {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("cgroup %s remains: %v", d, err)
		}
	}
	list, err := rt.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.ID == id {
			t.Errorf("List still has %s", id)
		}
	}
}

func TestKillPid1AndDeleteStopped(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	id := newID(t)
	spec := e.spec(t, id)
	spec.Args = []string{"sh", "-c", "echo started; exec sleep infinity"}
	if _, err := e.rt.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	// Kill only once PID 1 has written its line (a kill before it runs would lose it).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(spec.LogPath); string(b) == "started\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("PID 1 did not start within 30 s")
		}
	}
	if err := e.rt.Kill(ctx, id, syscall.SIGKILL, false); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e.rt, id, runtime.StatusStopped)
	if st, _ := e.rt.State(ctx, id); st.Pid != 0 {
		t.Errorf("stopped container has pid %d", st.Pid)
	}
	if err := e.rt.Kill(ctx, id, syscall.SIGTERM, false); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Kill of stopped container: %v, want ErrFailedPrecondition", err)
	}
	if code, err := e.rt.Exec(ctx, id, []string{"true"}, nil, nil); err == nil {
		t.Errorf("Exec in stopped container = %d, nil; want error", code)
	}
	if err := e.rt.Delete(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	assertGone(t, e.rt, id)
	if b, err := os.ReadFile(spec.LogPath); err != nil || string(b) != "started\n" {
		t.Errorf("console log = %q, %v", b, err)
	}
	if err := rootfs.Unmount(spec.RootFS); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownContainer(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	if _, err := e.rt.State(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("State: %v", err)
	}
	if err := e.rt.Kill(ctx, "nope", syscall.SIGTERM, false); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Kill: %v", err)
	}
	if _, err := e.rt.Exec(ctx, "nope", []string{"true"}, nil, nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Exec: %v", err)
	}
	if err := e.rt.Delete(ctx, "nope", false); err != nil {
		t.Errorf("Delete: %v", err)
	}
	if list, err := e.rt.List(ctx); err != nil || len(list) != 0 {
		t.Errorf("List = %v, %v", list, err)
	}
}

func TestStartFailureLeavesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	id := newID(t)
	spec := e.spec(t, id)
	spec.Args = []string{"/no/such/binary"}
	_, err := e.rt.Start(ctx, spec)
	if err == nil {
		t.Fatal("Start of a missing binary succeeded")
	}
	if !strings.Contains(err.Error(), "no such file") {
		t.Errorf("error does not carry runc's message: %v", err)
	}
	assertGone(t, e.rt, id)
	if _, err := os.Stat(filepath.Join(e.dir, "bundles", id)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("bundle remains: %v", err)
	}
	if err := rootfs.Unmount(spec.RootFS); err != nil {
		t.Fatal(err)
	}
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
	assertGone(t, e.rt, id)
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
	assertGone(t, e.rt, id)
	if err := rootfs.Unmount(spec.RootFS); err != nil {
		t.Fatal(err)
	}
}
