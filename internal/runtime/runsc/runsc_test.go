package runsc_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
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
	"github.com/hutchdev/hutch/internal/runtime/runsc"
)

// env is one test's runtime, image and overlay scratch space.
type env struct {
	rt    *runsc.Runtime
	image string
	dir   string
}

func newEnv(t *testing.T) *env { t.Helper(); return newEnvNet(t, "") }

// newEnvNet is newEnv with runsc's --network set to network ("" for the default).
func newEnvNet(t *testing.T, network string) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containers")
	}
	if _, err := exec.LookPath("runsc"); err != nil {
		t.Skip("runsc not installed (apt-get install runsc)")
	}
	img := imagetest.Default(t)
	dir := t.TempDir()
	rt, err := runsc.New(runsc.Config{Root: filepath.Join(dir, "runsc"), BundleDir: filepath.Join(dir, "bundles"), CgroupParent: "hutchrtsc", Network: network}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{rt: rt, image: img.RootFS, dir: dir}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		states, _ := rt.List(ctx)
		for _, s := range states {
			if err := rt.Delete(ctx, s.ID, true); err != nil {
				t.Errorf("cleanup delete %s: %v", s.ID, err)
			}
		}
		// runsc itself leaves nothing mounted in its state directory once its containers are
		// gone (a newer runsc's shared gofer namespace did: --gofer-network-namespace new).
		if left, _ := rootfs.ListMounts(filepath.Join(dir, "runsc")); len(left) > 0 {
			t.Errorf("mounts left in runsc's state directory: %v", left)
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
	return "rsc-test-" + hex.EncodeToString(b)
}

func (e *env) spec(t *testing.T, id string) runtime.Spec {
	t.Helper()
	base := filepath.Join(e.dir, id)
	merged := filepath.Join(base, "merged")
	if err := rootfs.Mount(e.image, filepath.Join(base, "upper"), filepath.Join(base, "work"), merged); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rootfs.Unmount(merged) })
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

// hostProcesses lists host PIDs whose command line mentions id (runsc's sandbox and gofer
// processes carry the container ID).
func hostProcesses(id string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(b, []byte(id)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func assertGone(t *testing.T, rt *runsc.Runtime, id string) {
	t.Helper()
	if _, err := rt.State(context.Background(), id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("State after Delete: %v, want ErrNotFound", err)
	}
	for _, d := range rt.CgroupDirs(id) {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("cgroup %s remains: %v", d, err)
		}
	}
	if pids := hostProcesses(id); len(pids) > 0 {
		t.Errorf("processes of %s remain: %v", id, pids)
	}
}

func TestContainerLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	id := newID(t)
	spec := e.spec(t, id)
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
	if list, err := e.rt.List(ctx); err != nil || len(list) != 1 || list[0] != st {
		t.Fatalf("List = %+v, %v", list, err)
	}
	for _, c := range []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"hostname", []string{"hostname"}, 0, id},
		{"cwd", []string{"pwd"}, 0, "/workspace"},
		{"write", []string{"sh", "-c", "echo from-gvisor > /workspace/hello.txt"}, 0, ""},
		{"mount denied", []string{"mount", "-t", "tmpfs", "none", "/mnt"}, 32, ""},
		{"python", []string{"python3", "-c", "print(6*7)"}, 0, "42"},
		{"exit code", []string{"sh", "-c", "exit 7"}, 7, ""},
	} {
		code, out := e.exec(t, id, c.args...)
		if code != c.wantCode || !strings.Contains(out, c.want) {
			t.Errorf("%s: %v: exit %d, output %q; want exit %d containing %q", c.name, c.args, code, out, c.wantCode, c.want)
		}
	}
	// The Sentry reports its own kernel release (4.4.0, 4.19.0-gvisor, …), not the host's.
	var host unix.Utsname
	if err := unix.Uname(&host); err != nil {
		t.Fatal(err)
	}
	if code, out := e.exec(t, id, "uname", "-r"); code != 0 || strings.TrimSpace(out) == unix.ByteSliceToString(host.Release[:]) {
		t.Errorf("uname -r inside: exit %d, %q: the host's kernel", code, out)
	}
	// Writes reach the host's upper dir at once (--file-access=shared), while running.
	upperFile := filepath.Join(e.dir, id, "upper", "workspace", "hello.txt")
	if b, err := os.ReadFile(upperFile); err != nil || string(b) != "from-gvisor\n" {
		t.Errorf("upper dir while running: %q, %v", b, err)
	}
	// The sandbox's processes are in the container's cgroups, with its limits.
	var inCgroup bool
	for _, d := range e.rt.CgroupDirs(id) {
		if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil && strings.Contains(string(b), strconv.Itoa(st.Pid)) {
			inCgroup = true
		}
		if strings.Contains(d, "/pids/") {
			// The sandbox's 64 are enforced in the Sentry (TestPidsLimitInSentry); the host
			// cgroup has room for the Sentry's threads and stubs too.
			if b, err := os.ReadFile(filepath.Join(d, "pids.max")); err != nil || strings.TrimSpace(string(b)) != strconv.FormatInt(runsc.SentryPids(64), 10) {
				t.Errorf("pids.max = %q, %v; want %d", b, err, runsc.SentryPids(64))
			}
		}
		// The sandbox's 256 MiB are enforced by hutchd's agent and memory guard; the host
		// cgroup has room for the Sentry's own memory too.
		for _, f := range []string{"memory.max", "memory.limit_in_bytes"} {
			if b, err := os.ReadFile(filepath.Join(d, f)); err == nil && strings.TrimSpace(string(b)) != strconv.FormatInt(runsc.SentryMemory(256<<20, 64), 10) {
				t.Errorf("%s = %q; want %d", f, b, runsc.SentryMemory(256<<20, 64))
			}
		}
	}
	// The memory guard's files are readable inside, and read-only.
	for _, f := range []string{runsc.GuardKillFile, runsc.GuardPressureFile} {
		if code, out := e.exec(t, id, "cat", f); code != 0 || out != "0\n" {
			t.Errorf("cat %s: exit %d, %q; want 0", f, code, out)
		}
		if code, out := e.exec(t, id, "sh", "-c", "echo 9 > "+f); code == 0 {
			t.Errorf("the guard's file %s is writable inside: %q", f, out)
		}
	}
	if code, out := e.exec(t, id, "sh", "-c", "touch "+runsc.GuardDir+"/x || ln -s / "+runsc.GuardDir+"/y"); code == 0 {
		t.Errorf("the guard's directory is writable inside: %q", out)
	}
	if !inCgroup {
		t.Errorf("sandbox pid %d is in none of %v", st.Pid, e.rt.CgroupDirs(id))
	}
	if err := e.rt.Delete(ctx, id, false); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Delete of running container without force: %v, want ErrFailedPrecondition", err)
	}
	if err := e.rt.Delete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	assertGone(t, e.rt, id)
	if err := e.rt.Delete(ctx, id, true); err != nil {
		t.Errorf("second Delete: %v", err)
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
	// runsc's "stopped" can flicker while PID 1 exits: twice in CI, `runsc state` said stopped,
	// then running (Exec ran, and a plain delete was refused). Probably (not proven) because
	// runsc asks the Sentry whether PID 1 takes signal 0, which may fail for a task in the middle
	// of its exit. hutchd deletes with force, so only this test met it. Stopped counts once it
	// held for 10 reads in a row.
	for deadline, held := time.Now().Add(30*time.Second), 0; held < 10; time.Sleep(20 * time.Millisecond) {
		st, err := e.rt.State(ctx, id)
		if err == nil && st.Status == runtime.StatusStopped {
			held++
		} else {
			held = 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("state = %+v, %v; want stopped", st, err)
		}
	}
	if _, err := e.rt.Exec(ctx, id, []string{"true"}, nil, nil); err == nil {
		t.Error("Exec in stopped container succeeded")
	}
	if err := e.rt.Delete(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	assertGone(t, e.rt, id)
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
	if err := e.rt.Pause(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Pause: %v", err)
	}
	if err := e.rt.Delete(ctx, "nope", false); err != nil {
		t.Errorf("Delete: %v", err)
	}
	if _, err := e.rt.State(ctx, "../x"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("State(../x): %v", err)
	}
	if list, err := e.rt.List(ctx); err != nil || len(list) != 0 {
		t.Errorf("List = %v, %v", list, err)
	}
}

func TestStartRefusals(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	id := newID(t)
	spec := e.spec(t, id)
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spec.ExtraFiles = []*os.File{f}
	if _, err := e.rt.Start(ctx, spec); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Start with ExtraFiles: %v, want ErrInvalidArgument", err)
	}
	spec.ExtraFiles = nil
	spec.Args = []string{"/no/such/binary"}
	if _, err := e.rt.Start(ctx, spec); err == nil {
		t.Fatal("Start of a missing binary succeeded")
	} else if !strings.Contains(err.Error(), "no such file") {
		t.Errorf("error does not carry runsc's message: %v", err)
	}
	assertGone(t, e.rt, id)
	if _, err := os.Stat(filepath.Join(e.dir, "bundles", id)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("bundle remains: %v", err)
	}
}

// TestNetNSHostSocketsAndPause covers what hutchd needs of the network configuration
// (--network=host in the sandbox's namespace): the namespace's interfaces and routes, a
// server on the sandbox's loopback reachable from the host through the namespace (preview
// URLs and the agent), connections out through the namespace's veth (egress via the gateway),
// a listening unix socket created in a bind mount that stays inside the Sentry (no
// --host-uds: the host cannot connect to it), and pause/resume.
func TestNetNSHostSocketsAndPause(t *testing.T) {
	e := newEnv(t)
	for _, bin := range []string{"ip", "python3"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skip(bin + " not installed")
		}
	}
	ctx := ctxT(t)
	id := newID(t)
	ns, veth := "hutch-"+id, "rsc"+id[len(id)-8:]
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	run("ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", ns).Run() })
	run("ip", "link", "add", veth, "type", "veth", "peer", "name", veth+"p")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "delete", veth).Run() })
	run("ip", "link", "set", veth+"p", "netns", ns)
	run("ip", "addr", "add", "10.198.7.1/30", "dev", veth)
	run("ip", "link", "set", veth, "up")
	run("ip", "-n", ns, "addr", "add", "10.198.7.2/30", "dev", veth+"p")
	run("ip", "-n", ns, "link", "set", veth+"p", "up")
	run("ip", "-n", ns, "link", "set", "lo", "up")

	// A host server on the veth: the sandbox's way out.
	ln, err := net.Listen("tcp", "10.198.7.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("host-says-hi\n"))
			c.Close()
		}
	}()

	sockDir := filepath.Join(e.dir, "sock")
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		t.Fatal(err)
	}
	spec := e.spec(t, id)
	spec.NetNSPath = "/var/run/netns/" + ns
	spec.Mounts = []runtime.Mount{{Source: sockDir, Destination: "/run/agent"}}
	spec.Args = []string{"python3", "-c", `
import socket, threading
def serve(s, msg):
    while True:
        c, _ = s.accept(); c.sendall(msg); c.close()
u = socket.socket(socket.AF_UNIX); u.bind("/run/agent/a.sock"); u.listen(8)
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(("127.0.0.1", 8080)); t.listen(8)
threading.Thread(target=serve, args=(t, b"loopback-ok\n"), daemon=True).start()
serve(u, b"uds-ok\n")
`}
	if _, err := e.rt.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	var out []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, err = exec.Command("ip", "netns", "exec", ns, "python3", "-c",
			`import socket; s = socket.create_connection(("127.0.0.1", 8080)); print(s.recv(100).decode(), end="")`).CombinedOutput()
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || string(out) != "loopback-ok\n" {
		b, _ := os.ReadFile(spec.LogPath)
		t.Fatalf("sandbox loopback from the host's side of the namespace: %q, %v; log: %s", out, err, b)
	}
	// The sandbox's unix socket lives in the Sentry only.
	if c, err := net.Dial("unix", filepath.Join(sockDir, "a.sock")); err == nil {
		c.Close()
		t.Errorf("a unix socket bound in a bind mount is reachable from the host")
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"interfaces of the namespace", []string{"cat", "/proc/net/dev"}, veth + "p"},
		{"connect out through the veth", []string{"python3", "-c", `import socket; s = socket.create_connection(("10.198.7.1", ` + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port) + `)); print(s.recv(100).decode(), end="")`}, "host-says-hi"},
	} {
		if code, out := e.exec(t, id, c.args...); code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d, %q; want %q", c.name, code, out, c.want)
		}
	}

	if err := e.rt.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if st, err := e.rt.State(ctx, id); err != nil || st.Status != runtime.StatusPaused {
		t.Errorf("State after Pause = %+v, %v", st, err)
	}
	if err := e.rt.Pause(ctx, id); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("second Pause: %v, want ErrFailedPrecondition", err)
	}
	if err := e.rt.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Resume(ctx, id); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("second Resume: %v, want ErrFailedPrecondition", err)
	}
	if code, out := e.exec(t, id, "echo", "alive"); code != 0 || out != "alive\n" {
		t.Errorf("exec after Resume: %d %q", code, out)
	}
	var nsStat unix.Stat_t
	if err := unix.Stat(spec.NetNSPath, &nsStat); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Delete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	assertGone(t, e.rt, id)
}

// TestSeccompInSentry checks the profile applied with --oci-seccomp to PID 1 and its
// descendants (hutch-init and everything it runs): calls outside the allow-list (unshare,
// ptrace) fail with EPERM inside the sandbox, clone3 answers ENOSYS (the profile's rule, SCMP_ACT_TRACE here)
// so glibc falls back to clone and threads start, clone with a namespace flag is refused, and
// pselect6 (named "pselect" in runsc's table) is allowed.
// (`runsc exec` processes are not children of PID 1 and do not get the filter; hutchd never
// runs sandbox code that way.)
func TestSeccompInSentry(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	spec := e.spec(t, id)
	spec.Args = []string{"python3", "-c", `
import ctypes, threading, time
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *a):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a])
    return "ok" if r >= 0 else "errno=%d" % ctypes.get_errno()
print("unshare", call(272, 0x10000000))
print("ptrace", call(101, 16, 1, 0, 0))
print("clone3", call(435, 0, 0))
print("clone-newuser", call(56, 0x10000000 | 17, 0, 0, 0, 0))
ts = (ctypes.c_long * 2)(0, 0)
r = libc.syscall(ctypes.c_long(270), ctypes.c_long(0), None, None, None, ctypes.byref(ts), None)
print("pselect6", "ok" if r == 0 else "errno=%d" % ctypes.get_errno())
t = threading.Thread(target=lambda: None); t.start(); t.join()
print("thread ok", flush=True)
time.sleep(3600)
`}
	if _, err := e.rt.Start(ctxT(t), spec); err != nil {
		t.Fatal(err)
	}
	var out []byte
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if out, _ = os.ReadFile(spec.LogPath); bytes.Contains(out, []byte("thread ok")) || bytes.Contains(out, []byte("Error")) {
			break
		}
	}
	for _, w := range []string{"unshare errno=1", "ptrace errno=1", "clone-newuser errno=1", "pselect6 ok", "thread ok"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("output %q: want %q", out, w)
		}
	}
	// clone3 with no arguments: ENOSYS from the profile's rule (SCMP_ACT_TRACE without a tracer),
	// before the Sentry looks at the arguments (a Sentry with clone3 would say EINVAL); never
	// EPERM, which would stop glibc from starting threads ("thread ok" above).
	if !strings.Contains(string(out), "clone3 errno=38") {
		t.Errorf("output %q: want clone3 errno=38 (ENOSYS)", out)
	}
}

// TestPidsLimitInSentry runs a fork loop of sleeping children in a sandbox limited to 64 tasks:
// the fork past the limit fails with EAGAIN inside (RLIMIT_NPROC in the Sentry), the sandbox
// keeps running and answers, and the host cgroup never reached its own limit (which would
// have killed the Sentry).
func TestPidsLimitInSentry(t *testing.T) {
	e := newEnv(t)
	id := newID(t)
	spec := e.spec(t, id)
	spec.Resources.MemoryBytes = 1 << 30
	spec.Args = []string{"python3", "-c", `
import os, time
n = 0
while True:
    try:
        if os.fork() == 0:
            time.sleep(3600)
            os._exit(0)
        n += 1
    except OSError as e:
        print("stopped", n, "errno", e.errno, flush=True)
        break
time.sleep(3600)
`}
	st, err := e.rt.Start(ctxT(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if out, _ = os.ReadFile(spec.LogPath); bytes.Contains(out, []byte("stopped")) {
			break
		}
	}
	i := bytes.Index(out, []byte("stopped"))
	if i < 0 {
		t.Fatalf("output %q: the fork loop never stopped (or the sandbox died)", out)
	}
	var n, errno int
	if _, err := fmt.Sscanf(string(out[i:]), "stopped %d errno %d", &n, &errno); err != nil || errno != 11 || n < 32 || n >= 64 {
		t.Fatalf("output %q: want \"stopped N errno 11\" with 32 <= N < 64 (%v)", out, err)
	}
	got, err := e.rt.State(ctxT(t), id)
	if err != nil || got.Status != runtime.StatusRunning || got.Pid != st.Pid {
		t.Fatalf("State = %+v, %v; want the same sandbox running", got, err)
	}
	for _, d := range e.rt.CgroupDirs(id) {
		if !strings.Contains(d, "/pids/") {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(d, "pids.events")); err == nil && strings.TrimSpace(string(b)) != "max 0" {
			t.Errorf("host pids.events = %q: the host limit was reached", b)
		}
	}
}

// TestPrefixIDs runs two containers whose IDs are a prefix of each other ("x" and "x-fork",
// like a sandbox and its fork): runsc takes IDs on its command line as prefixes and refused
// "x" as ambiguous, so every operation on the shorter one failed. Each container answers for
// itself, and List names both.
func TestPrefixIDs(t *testing.T) {
	e := newEnv(t)
	short := newID(t)
	long := short + "-fork"
	for _, id := range []string{short, long} {
		spec := e.spec(t, id)
		if _, err := e.rt.Start(ctxT(t), spec); err != nil {
			t.Fatalf("Start(%s): %v", id, err)
		}
	}
	for _, id := range []string{short, long} {
		if st, err := e.rt.State(ctxT(t), id); err != nil || st.ID != id || st.Status != runtime.StatusRunning {
			t.Errorf("State(%s) = %+v, %v", id, st, err)
		}
		if code, out := e.exec(t, id, "hostname"); code != 0 || strings.TrimSpace(out) != id {
			t.Errorf("exec hostname in %s: %d %q", id, code, out)
		}
		if err := e.rt.Pause(ctxT(t), id); err != nil {
			t.Errorf("Pause(%s): %v", id, err)
		}
		if err := e.rt.Resume(ctxT(t), id); err != nil {
			t.Errorf("Resume(%s): %v", id, err)
		}
	}
	all, err := e.rt.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, st := range all {
		seen[st.ID] = true
	}
	if !seen[short] || !seen[long] {
		t.Errorf("List = %+v; want %s and %s", all, short, long)
	}
	if err := e.rt.Delete(ctxT(t), short, true); err != nil {
		t.Fatalf("Delete(%s): %v", short, err)
	}
	if st, err := e.rt.State(ctxT(t), long); err != nil || st.Status != runtime.StatusRunning {
		t.Errorf("after deleting %s: State(%s) = %+v, %v", short, long, st, err)
	}
}
