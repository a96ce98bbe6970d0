package runsc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/rootfs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/runsc"
	"github.com/hutchdev/hutch/internal/runtime/runsc/guard"
	"github.com/hutchdev/hutch/internal/runtime/runtimetest"
	"github.com/hutchdev/hutch/internal/testutil"
)

// harness runs runsc under the conformance suite with runsc's --network set to network
// ("" for the default); newEnvNet gives the package's own tests the same environment.
func harness(network string) runtimetest.Harness {
	return runtimetest.Harness{IDPrefix: "rsc-test-", New: func(t *testing.T, dir string) runtimetest.Runtime {
		t.Helper()
		if _, err := exec.LookPath("runsc"); err != nil {
			t.Skip("runsc not installed (apt-get install runsc)")
		}
		rt, err := runsc.New(runsc.Config{Root: filepath.Join(dir, "runsc"), BundleDir: filepath.Join(dir, "bundles"), CgroupParent: "hutchrtsc", Network: network}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		// Registered before the suite's cleanup, so run after it: runsc itself leaves
		// nothing mounted in its state directory once its containers are gone (a newer
		// runsc's shared gofer namespace did: --gofer-network-namespace new).
		t.Cleanup(func() {
			if left, _ := rootfs.ListMounts(filepath.Join(dir, "runsc")); len(left) > 0 {
				t.Errorf("mounts left in runsc's state directory: %v", left)
			}
		})
		return rt
	}}
}

// TestConformance runs the runtime contract's suite (internal/runtime/runtimetest) on runsc.
func TestConformance(t *testing.T) { runtimetest.Conformance(t, harness("")) }

// env is one test's runtime, image and overlay scratch space.
type env struct {
	*runtimetest.Env
	rt    *runsc.Runtime
	image string
	dir   string
}

func newEnv(t *testing.T) *env { t.Helper(); return newEnvNet(t, "") }

// newEnvNet is newEnv with runsc's --network set to network ("" for the default).
func newEnvNet(t *testing.T, network string) *env {
	t.Helper()
	e := runtimetest.NewEnv(t, harness(network))
	return &env{Env: e, rt: e.RT.(*runsc.Runtime), image: e.Image, dir: e.Dir}
}

func newID(t *testing.T) string { return runtimetest.NewID("rsc-test-") }

func (e *env) spec(t *testing.T, id string) runtime.Spec { t.Helper(); return e.Spec(t, id) }

func ctxT(t *testing.T) context.Context { return runtimetest.Ctx(t) }

func (e *env) exec(t *testing.T, id string, args ...string) (int, string) {
	t.Helper()
	return e.Exec(t, id, args...)
}

// TestSentry checks what is gVisor's own in a running sandbox: the Sentry's kernel, the host
// cgroup's room for the Sentry above the sandbox's limits, and the memory guard's files; the
// contract's lifecycle is TestConformance's.
func TestSentry(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	id := newID(t)
	spec := e.spec(t, id)
	st, err := e.rt.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	// The Sentry reports its own kernel release (4.4.0, 4.19.0-gvisor, …), not the host's.
	var host unix.Utsname
	if err := unix.Uname(&host); err != nil {
		t.Fatal(err)
	}
	if code, out := e.exec(t, id, "uname", "-r"); code != 0 || strings.TrimSpace(out) == unix.ByteSliceToString(host.Release[:]) {
		t.Errorf("uname -r inside: exit %d, %q: the host's kernel", code, out)
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
			if b, err := os.ReadFile(filepath.Join(d, "pids.max")); err != nil || strings.TrimSpace(string(b)) != strconv.FormatInt(guard.SentryPids(64), 10) {
				t.Errorf("pids.max = %q, %v; want %d", b, err, guard.SentryPids(64))
			}
		}
		// The sandbox's 256 MiB are enforced by hutchd's agent and memory guard; the host
		// cgroup has room for the Sentry's own memory too.
		for _, f := range []string{"memory.max", "memory.limit_in_bytes"} {
			if b, err := os.ReadFile(filepath.Join(d, f)); err == nil && strings.TrimSpace(string(b)) != strconv.FormatInt(guard.SentryMemory(256<<20, 64), 10) {
				t.Errorf("%s = %q; want %d", f, b, guard.SentryMemory(256<<20, 64))
			}
		}
	}
	// The memory guard's files are readable inside, and read-only.
	for _, f := range []string{guard.KillFile, guard.PressureFile} {
		if code, out := e.exec(t, id, "cat", f); code != 0 || out != "0\n" {
			t.Errorf("cat %s: exit %d, %q; want 0", f, code, out)
		}
		if code, out := e.exec(t, id, "sh", "-c", "echo 9 > "+f); code == 0 {
			t.Errorf("the guard's file %s is writable inside: %q", f, out)
		}
	}
	if code, out := e.exec(t, id, "sh", "-c", "touch "+guard.Dir+"/x || ln -s / "+guard.Dir+"/y"); code == 0 {
		t.Errorf("the guard's directory is writable inside: %q", out)
	}
	if !inCgroup {
		t.Errorf("sandbox pid %d is in none of %v", st.Pid, e.rt.CgroupDirs(id))
	}
	if err := e.rt.Delete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	e.AssertGone(t, id)
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
	testutil.Poll(t, 50*time.Millisecond, 30*time.Second, func() bool {
		out, err = exec.Command("ip", "netns", "exec", ns, "python3", "-c",
			`import socket; s = socket.create_connection(("127.0.0.1", 8080)); print(s.recv(100).decode(), end="")`).CombinedOutput()
		return err == nil
	})
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
	e.AssertGone(t, id)
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
	testutil.Poll(t, 50*time.Millisecond, time.Minute, func() bool {
		out, _ = os.ReadFile(spec.LogPath)
		return bytes.Contains(out, []byte("thread ok")) || bytes.Contains(out, []byte("Error"))
	})
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
	testutil.Poll(t, 100*time.Millisecond, 2*time.Minute, func() bool {
		out, _ = os.ReadFile(spec.LogPath)
		return bytes.Contains(out, []byte("stopped"))
	})
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
