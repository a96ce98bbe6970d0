package e2e

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// testRuntimes are the container runtimes the escape and containment suites run against. Each
// suite runs one subtest per runtime; requireRuntime skips the gvisor one when runsc is not
// installed.
func testRuntimes() []string { return []string{"runc", "gvisor"} }

// requireRuntime skips t when runtime rt cannot run on this host.
func requireRuntime(t *testing.T, rt string) {
	t.Helper()
	if rt == "gvisor" && !have("runsc") {
		t.Skip("runsc is not installed (apt-get install runsc): the gvisor runtime is not tested")
	}
}

// withRuntime returns opts for a sandbox on runtime rt.
func withRuntime(opts *client.SandboxOptions, rt string) *client.SandboxOptions {
	if opts == nil {
		opts = &client.SandboxOptions{}
	}
	opts.Runtime = rt
	return opts
}

// sysScript calls one raw system call: argv[1] is its number, then its arguments (integers, or
// "s:<text>" for a pointer to a C string). It prints BLOCKED <errno> when the call failed with
// EPERM, EACCES or ENOSYS (refused before the kernel looked at the arguments, or by a missing
// privilege), else ESCAPED with the result or errno: any other answer means the kernel code
// behind the call was reached.
const sysScript = `
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
args = []
for a in sys.argv[2:]:
    args.append(ctypes.c_char_p(a[2:].encode()) if a.startswith("s:") else ctypes.c_long(int(a, 0)))
r = libc.syscall(ctypes.c_long(int(sys.argv[1])), *args)
e = ctypes.get_errno()
if r == -1 and e in (errno.EPERM, errno.EACCES, errno.ENOSYS):
    print("BLOCKED", errno.errorcode[e])
elif r == -1:
    print("ESCAPED errno", errno.errorcode.get(e, e))
else:
    print("ESCAPED ret", r)
`

// x86-64 system call numbers used below.
const (
	sysPtrace        = 101
	sysSyslog        = 103
	sysMount         = 165
	sysInitModule    = 175
	sysKexecLoad     = 246
	sysAddKey        = 248
	sysKeyctl        = 250
	sysUnshare       = 272
	sysPerfEventOpen = 298
	sysOpenByHandle  = 304
	sysSetns         = 308
	sysFinitModule   = 313
	sysBpf           = 321
	sysUserfaultfd   = 323
	sysIOUringSetup  = 425
)

// escapeEnv is what the attempts may use: the attacking sandbox, a second sandbox, and facts
// about the host.
type escapeEnv struct {
	a, b      *client.Sandbox
	addrB     string
	gateway   string
	gatewayB  string
	apiPort   int
	hostPort  int // a listener on every host address
	loPort    int // a listener on the host's 127.0.0.1 only
	hutchdPID int
	marker    string // a host file with markerText
	secret    string // an operator's token, passed in one command's env
}

const markerText = "hutch-escape-marker-5736"

// escapeCase is one attempt. run performs it and returns the evidence (output, error); it
// reports escaped when the attempt got through.
type escapeCase struct {
	name      string
	blockedBy string
	run       func(t *testing.T, e *escapeEnv) (evidence string, escaped bool)
}

// inside runs a shell command in sandbox a and reports escaped when its output has ESCAPED or
// lacks BLOCKED.
func inside(cmd string) func(t *testing.T, e *escapeEnv) (string, bool) {
	return func(t *testing.T, e *escapeEnv) (string, bool) {
		out := execAll(t, e.a, cmd)
		return out, strings.Contains(out, "ESCAPED") || !strings.Contains(out, "BLOCKED")
	}
}

// syscallTry calls one system call in sandbox a through sysScript.
func syscallTry(nr int, args ...string) func(t *testing.T, e *escapeEnv) (string, bool) {
	return inside(fmt.Sprintf("python3 /tmp/sys.py %d %s", nr, strings.Join(args, " ")))
}

// execAll runs cmd and returns stdout and stderr together, whatever the exit code.
func execAll(t *testing.T, sb *client.Sandbox, cmd string) string {
	t.Helper()
	res, err := sb.Exec(ctxT(t, 2*time.Minute), cmd, nil)
	if err != nil {
		t.Fatalf("Exec(%q) = %v", cmd, err)
	}
	return strings.TrimSpace(string(res.Stdout) + string(res.Stderr))
}

// pyTry runs a python3 snippet that prints BLOCKED or ESCAPED.
func pyTry(code string) func(t *testing.T, e *escapeEnv) (string, bool) {
	return inside("python3 - <<'PY'\n" + code + "\nPY")
}

// tcpTry probes host:port from sandbox a; a connection is an escape.
func tcpTry(host func(e *escapeEnv) string, port func(e *escapeEnv) int) func(t *testing.T, e *escapeEnv) (string, bool) {
	return func(t *testing.T, e *escapeEnv) (string, bool) {
		got := probe(t, e.a, host(e), port(e))
		return fmt.Sprintf("%s:%d %s", host(e), port(e), got), strings.HasPrefix(got, "OPEN")
	}
}

// httpTry fetches url from sandbox a (through the transparent egress proxy); 200 is an escape.
func httpTry(url func(e *escapeEnv) string) func(t *testing.T, e *escapeEnv) (string, bool) {
	return func(t *testing.T, e *escapeEnv) (string, bool) {
		u := url(e)
		out := execAll(t, e.a, "curl -s -o /dev/null -w '%{http_code}' --max-time 5 '"+u+"' || true")
		return u + " -> HTTP " + out, out == "200"
	}
}

func fixed[T any](v T) func(*escapeEnv) T { return func(*escapeEnv) T { return v } }

// agentScript attacks the agent's own processes (every process whose argv[0] is hutch-init:
// PID 1, the server, the shims of running commands) the way a sandbox's root would to steal an
// operator's data from them. argv[1] is the attempt; argv[2] is the operator's secret reversed
// (so that the attacking command, which passes through the agent, never holds it as sent). It
// prints a BLOCKED or ESCAPED line per agent process, and no BLOCKED when it found none.
const agentScript = `
import ctypes, errno, os, sys
mode, secret = sys.argv[1], sys.argv[2][::-1].encode()
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
refused = (errno.EPERM, errno.EACCES, errno.ENOSYS)

def agents():
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            argv0 = open("/proc/%s/cmdline" % p, "rb").read().split(b"\0")[0]
        except OSError:
            continue
        if os.path.basename(argv0) == b"hutch-init":
            out.append(int(p))
    return sorted(out)

def regions(pid):
    # The writable mappings; a guess of Go's usual heap start when maps is refused too.
    try:
        rs = []
        for line in open("/proc/%d/maps" % pid):
            f = line.split()
            if f[1].startswith("rw"):
                a, b = (int(x, 16) for x in f[0].split("-"))
                rs.append((a, b))
        return rs
    except OSError:
        return [(0xc000000000, 0xc000001000)]

def find(fd, pid):
    # Where the secret is in the process's memory, or None (reads at most 512 MiB).
    budget = 512 << 20
    for a, b in regions(pid):
        for off in range(a, b, 1 << 20):
            if budget <= 0:
                return None
            n = min(1 << 20, b - off)
            budget -= n
            try:
                data = os.pread(fd, n, off)
            except OSError:
                break
            i = data.find(secret)
            if i >= 0:
                return off + i
    return None

def mem(pid, write):
    try:
        fd = os.open("/proc/%d/mem" % pid, os.O_RDWR if write else os.O_RDONLY)
    except OSError as e:
        return "BLOCKED open: %s" % e.strerror
    at = find(fd, pid)
    if not write:
        return "ESCAPED opened; operator's secret %s" % ("at %#x" % at if at is not None else "not found")
    if at is None:
        a = regions(pid)[0][0]
        old = os.pread(fd, 8, a)
        return "ESCAPED opened read-write; wrote back %d bytes at %#x" % (os.pwrite(fd, old, a), a)
    return "ESCAPED wrote the operator's secret back at %#x (%d bytes)" % (at, os.pwrite(fd, secret, at))

def environ(pid):
    try:
        data = open("/proc/%d/environ" % pid, "rb").read()
    except OSError as e:
        return "BLOCKED %s" % e.strerror
    return "ESCAPED read %d bytes%s" % (len(data), ", the operator's secret among them" if secret in data else "")

def vm_readv(pid):
    buf = ctypes.create_string_buffer(64)
    local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 64)
    remote = (ctypes.c_void_p * 2)(regions(pid)[0][0], 64)
    r = libc.syscall(310, pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    e = ctypes.get_errno()
    if r == -1 and e in refused:
        return "BLOCKED " + errno.errorcode[e]
    return "ESCAPED ret %d errno %s" % (r, errno.errorcode.get(e, e))

def getfd(pid):
    pidfd = libc.syscall(434, pid, 0)
    if pidfd < 0:
        return "pidfd_open failed: errno %s" % errno.errorcode.get(ctypes.get_errno())
    out = []
    for fd in range(8):
        r = libc.syscall(438, pidfd, fd, 0)
        e = ctypes.get_errno()
        if r >= 0:
            return "ESCAPED got the agent's fd %d" % fd
        if e not in refused:
            # EBADF: the permission check passed and the fd was not there.
            return "ESCAPED errno %s on fd %d" % (errno.errorcode.get(e, e), fd)
        out.append(errno.errorcode[e])
    return "BLOCKED " + ",".join(sorted(set(out)))

try_ = {"mem-read": lambda p: mem(p, False), "mem-write": lambda p: mem(p, True), "environ": environ,
        "process_vm_readv": vm_readv, "pidfd_getfd": getfd}[mode]
pids = agents()
if not pids:
    print("no hutch-init process found")
for pid in pids:
    argv = open("/proc/%d/cmdline" % pid, "rb").read().split(b"\0")
    print(pid, b" ".join(argv[:2]).decode(errors="replace"), try_(pid))
`

// agentTry first runs a command with an operator's secret in its env (which the agent's
// server and the command's shim then held), then runs agentScript's attempt mode from another
// command.
func agentTry(mode string) func(t *testing.T, e *escapeEnv) (string, bool) {
	return func(t *testing.T, e *escapeEnv) (string, bool) {
		res, err := e.a.Exec(ctxT(t, time.Minute), "test -n \"$HUTCH_OPERATOR_TOKEN\"", &client.ExecOptions{Env: map[string]string{"HUTCH_OPERATOR_TOKEN": e.secret}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec with the secret: %v %+v", err, res)
		}
		rev := []byte(e.secret)
		slices.Reverse(rev)
		return inside("python3 /tmp/agent.py "+mode+" "+string(rev))(t, e)
	}
}

var escapeCases = []escapeCase{
	// File systems and namespaces.
	{"mount a tmpfs (mount(8))", "seccomp (mount not allowed); no CAP_SYS_ADMIN",
		inside("mount -t tmpfs none /mnt 2>&1 && echo ESCAPED || echo BLOCKED")},
	{"mount proc (mount(2))", "seccomp; no CAP_SYS_ADMIN", syscallTry(sysMount, "s:proc", "s:/mnt", "s:proc", "0", "0")},
	{"unshare a user namespace (unshare -Ur)", "seccomp (unshare not allowed)",
		inside("unshare -Ur id 2>&1 && echo ESCAPED || echo BLOCKED")},
	{"unshare a mount namespace (unshare(2))", "seccomp", syscallTry(sysUnshare, "0x20000")},
	{"unshare a user namespace (unshare(2))", "seccomp", syscallTry(sysUnshare, "0x10000000")},
	{"clone with CLONE_NEWUSER", "seccomp (clone with namespace flags refused)", pyTry(`
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(56, ctypes.c_ulong(0x10000000 | 17), 0, 0, 0, 0)
if r == 0:
    os._exit(0)
print("ESCAPED" if r > 0 else "BLOCKED errno %d" % ctypes.get_errno())`)},
	{"clone3 (flags unreadable by seccomp)", "seccomp answers ENOSYS; libc falls back to clone", syscallTry(435, "0", "0")},
	{"setns into PID 1's namespaces", "seccomp", syscallTry(sysSetns, "0", "0")},
	// Kernel.
	{"load a kernel module (init_module)", "seccomp; no CAP_SYS_MODULE", syscallTry(sysInitModule, "0", "0", "s:")},
	{"load a kernel module (finit_module)", "seccomp; no CAP_SYS_MODULE", syscallTry(sysFinitModule, "0", "s:", "0")},
	{"kexec_load", "seccomp; no CAP_SYS_BOOT", syscallTry(sysKexecLoad, "0", "0", "0", "0")},
	{"bpf()", "seccomp", syscallTry(sysBpf, "0", "0", "0")},
	{"perf_event_open()", "seccomp", syscallTry(sysPerfEventOpen, "0", "0", "-1", "-1", "0")},
	{"keyctl()", "seccomp", syscallTry(sysKeyctl, "0", "-3", "0")},
	{"add_key()", "seccomp", syscallTry(sysAddKey, "s:user", "s:k", "s:v", "1", "-3")},
	{"io_uring_setup()", "seccomp", syscallTry(sysIOUringSetup, "1", "0")},
	{"userfaultfd()", "seccomp", syscallTry(sysUserfaultfd, "0")},
	{"open_by_handle_at() (shocker)", "seccomp; no CAP_DAC_READ_SEARCH", syscallTry(sysOpenByHandle, "3", "0", "0")},
	{"syslog() (kernel log)", "seccomp; no CAP_SYSLOG", syscallTry(sysSyslog, "3", "0", "0")},
	// Devices.
	{"open /dev/mem, /dev/kmem, /dev/port", "not in /dev; device cgroup denies all but the standard devices", pyTry(`
for p in ("/dev/mem", "/dev/kmem", "/dev/port"):
    try:
        open(p, "rb").read(1); print("ESCAPED", p)
    except OSError as e:
        print("BLOCKED", p, e.__class__.__name__)`)},
	{"mknod /dev/mem and open it", "no CAP_MKNOD; device cgroup", pyTry(`
import os, stat
try:
    os.mknod("/tmp/mem", stat.S_IFCHR | 0o600, os.makedev(1, 1))
    open("/tmp/mem", "rb").read(1); print("ESCAPED")
except OSError as e:
    print("BLOCKED", e)`)},
	{"mknod the host's disk and open it", "no CAP_MKNOD; device cgroup", pyTry(`
import os, stat
try:
    parts = [l.split() for l in open("/proc/partitions").read().splitlines()[2:] if l.strip()]
except OSError:
    parts = []  # gVisor has no /proc/partitions: guess the usual virtio disk
major, minor = (int(parts[0][0]), int(parts[0][1])) if parts else (253, 0)
try:
    os.mknod("/tmp/disk", stat.S_IFBLK | 0o600, os.makedev(major, minor))
    open("/tmp/disk", "rb").read(512); print("ESCAPED")
except OSError as e:
    print("BLOCKED", major, minor, e)`)},
	// gVisor's /dev also has fuse: the Sentry's own FUSE device, which serves only FUSE mounts
	// inside the Sentry. It counts as standard only when a FUSE mount through it is refused
	// (mount needs CAP_SYS_ADMIN and is outside the seccomp allow-list), so nothing can use it.
	{"only the standard devices in /dev", "runc's device set; device cgroup deny-all plus standard devices", pyTry(`
import ctypes, os
std = {"null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts", "shm", "mqueue", "fd", "stdin", "stdout", "stderr", "core", "console"}
extra = set(os.listdir("/dev")) - std
if "fuse" in extra:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/dev/fuse", os.O_RDWR)
    r = libc.mount(b"fuse", b"/mnt", b"fuse", 0, b"fd=%d,rootmode=40000,user_id=0,group_id=0" % fd)
    if r != 0:
        print("fuse mount refused, errno", ctypes.get_errno())
        extra.discard("fuse")
if "char" in extra and os.path.isdir("/dev/char") and not os.path.islink("/dev/char"):
    # Newer Sentries add Linux's /dev/char: "major:minor" links to the devices above.
    ok = lambda t: os.path.dirname(t) == "/dev" and os.path.basename(t) in std | {"fuse"} or os.path.dirname(t) == "/dev/pts"
    odd = [n for n in os.listdir("/dev/char") if not os.path.islink("/dev/char/" + n) or not ok(os.path.realpath("/dev/char/" + n))]
    if odd:
        print("/dev/char holds", sorted((n, os.path.realpath("/dev/char/" + n)) for n in odd))
    else:
        extra.discard("char")
extra = sorted(extra)
print("ESCAPED extra devices: %s" % extra if extra else "BLOCKED only standard devices")`)},
	{"read /proc/kcore, /proc/kallsyms, /proc/keys, /sys/kernel/security, /sys/firmware, /sys/kernel/debug", "masked paths (bind of /dev/null or an empty read-only tmpfs)", pyTry(`
import os
leaks = []
for p in ("/proc/kcore", "/proc/kallsyms", "/proc/keys", "/proc/timer_list", "/sys/kernel/security", "/sys/firmware", "/sys/kernel/debug", "/sys/kernel/tracing", "/sys/fs/bpf"):
    try:
        if os.path.isdir(p):
            if os.listdir(p): leaks.append(p)
        elif open(p, "rb").read(4096):
            leaks.append(p)
    except OSError:
        pass
print("ESCAPED %s" % leaks if leaks else "BLOCKED nothing readable")`)},
	{"write a cgroup release_agent", "/sys/fs/cgroup is mounted read-only in a cgroup namespace; mount refused", pyTry(`
import glob
wrote = []
for p in glob.glob("/sys/fs/cgroup/release_agent") + glob.glob("/sys/fs/cgroup/*/release_agent") + glob.glob("/sys/fs/cgroup/*/notify_on_release"):
    try:
        with open(p, "w") as f:
            f.write("/tmp/x")
        wrote.append(p)
    except OSError:
        pass
print("ESCAPED %s" % wrote if wrote else "BLOCKED")`)},
	{"write /proc/sysrq-trigger and /proc/sys", "read-only paths", inside(
		"(echo h > /proc/sysrq-trigger && echo ESCAPED sysrq) 2>/dev/null; (echo 1 > /proc/sys/vm/drop_caches && echo ESCAPED sysctl) 2>/dev/null; echo BLOCKED")},
	// Sockets.
	{"raw socket", "seccomp allows only AF_UNIX/INET/INET6/NETLINK; no CAP_NET_RAW", pyTry(`
import socket
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); print("ESCAPED")
except OSError as e:
    print("BLOCKED", e)`)},
	{"packet socket", "seccomp (AF_PACKET refused); no CAP_NET_RAW", pyTry(`
import socket
try:
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0x0300); print("ESCAPED")
except OSError as e:
    print("BLOCKED", e)`)},
	// Processes.
	{"see processes outside the sandbox", "PID namespace", func(t *testing.T, e *escapeEnv) (string, bool) {
		out := execAll(t, e.a, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '")
		return "processes: " + out, strings.Contains(out, "hutchd") || strings.Contains(out, "runc") || strings.Contains(out, "runsc")
	}},
	{"ptrace hutchd's PID number", "seccomp (ptrace not allowed); PID namespace; no CAP_SYS_PTRACE", func(t *testing.T, e *escapeEnv) (string, bool) {
		return syscallTry(sysPtrace, "16", fmt.Sprint(e.hutchdPID), "0", "0")(t, e)
	}},
	{"ptrace the agent (PID 1)", "seccomp", syscallTry(sysPtrace, "16", "1", "0", "0")},
	// The agent's own processes hold operator data (every exec's env passes through the
	// server; a shim holds its command's env): sandbox root is their uid, so only their being
	// non-dumpable, with no CAP_SYS_PTRACE in the sandbox, keeps it out.
	{"read the agent's memory (/proc/<agent>/mem)", "the agent's processes are non-dumpable (PR_SET_DUMPABLE 0) and the sandbox has no CAP_SYS_PTRACE", agentTry("mem-read")},
	{"write the agent's memory (/proc/<agent>/mem)", "non-dumpable agent processes; no CAP_SYS_PTRACE", agentTry("mem-write")},
	{"read the agent's environment (/proc/<agent>/environ)", "non-dumpable agent processes; no CAP_SYS_PTRACE", agentTry("environ")},
	{"process_vm_readv() of the agent", "seccomp; non-dumpable agent processes; no CAP_SYS_PTRACE", agentTry("process_vm_readv")},
	{"pidfd_getfd() of the agent's fds", "seccomp; non-dumpable agent processes; no CAP_SYS_PTRACE", agentTry("pidfd_getfd")},
	// A write open that succeeds is an escape only when the file is not the sandbox's own: gVisor
	// has no ETXTBSY, so there /proc/self/exe opens for writing, but it is the sandbox's own
	// python3 (same device and inode as the path it names inside the sandbox), which the
	// sandbox may change anyway. The host binaries' checksums are compared after the suite.
	{"overwrite the running binary through /proc/self/exe", "ETXTBSY for a running binary; runc runs from a sealed memfd copy; no runc exec into sandboxes", pyTry(`
import os
hits = []
for p in ("/proc/self/exe", "/proc/1/exe"):
    try:
        fd = os.open(p, os.O_WRONLY)
    except OSError as e:
        print("refused", p, e)
        continue
    st, target = os.fstat(fd), os.readlink(p)
    os.close(fd)
    try:
        own = os.stat(target)
        if (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino):
            print("opened", p, "= the sandbox's own", target)
            continue
    except OSError:
        pass
    hits.append(p)
print("ESCAPED %s" % hits if hits else "BLOCKED")`)},
	{"overwrite the agent binary", "read-only bind mount", inside(
		"(echo x >> /.hutch/hutch-init && echo ESCAPED) 2>&1; (cp /bin/true /.hutch/hutch-init && echo ESCAPED) 2>&1; echo BLOCKED")},
	// Host paths through hutchd.
	{"files API read through a planted symlink", "the agent resolves paths inside the sandbox's mount namespace", func(t *testing.T, e *escapeEnv) (string, bool) {
		mustExec(t, e.a, "ln -sfn "+e.marker+" /workspace/evil-read && ln -sfn / /workspace/hostroot")
		var out []string
		for _, p := range []string{"/workspace/evil-read", "/workspace/hostroot" + e.marker} {
			got, err := e.a.ReadFile(ctxT(t, time.Minute), p)
			if err == nil && strings.Contains(string(got.Content), markerText) {
				return "read the host marker through " + p, true
			}
			out = append(out, fmt.Sprintf("%s: %v", p, err))
		}
		return strings.Join(out, "; "), false
	}},
	{"files API write through a planted symlink", "the agent resolves paths inside the sandbox", func(t *testing.T, e *escapeEnv) (string, bool) {
		target := filepath.Join(os.TempDir(), "hutch-escape-written")
		os.Remove(target)
		t.Cleanup(func() { os.Remove(target) })
		mustExec(t, e.a, "ln -sfn "+target+" /workspace/evil-write")
		err := e.a.WriteFile(ctxT(t, time.Minute), "/workspace/evil-write", []byte("pwned"))
		if _, serr := os.Stat(target); serr == nil {
			return "host file " + target + " written", true
		}
		return fmt.Sprintf("write: %v; host path untouched", err), false
	}},
	{"backup and restore of planted symlinks", "archives store symlinks as symlinks; restore resolves inside the sandbox", func(t *testing.T, e *escapeEnv) (string, bool) {
		mustExec(t, e.a, "mkdir -p /workspace/bk && ln -sfn "+e.marker+" /workspace/bk/link && ln -sfn / /workspace/bk/root && ln -sfn "+filepath.Dir(e.marker)+" /workspace/bk/dir")
		bk, err := e.a.CreateBackup(ctxT(t, 5*time.Minute), client.BackupOptions{Dir: "/workspace/bk"})
		if err != nil {
			t.Fatalf("CreateBackup: %v", err)
		}
		if _, err := e.a.RestoreBackup(ctxT(t, 5*time.Minute), bk.ID, "/workspace/bk-restored"); err != nil {
			t.Fatalf("RestoreBackup: %v", err)
		}
		out := execAll(t, e.a, "grep -r "+markerText+" /workspace/bk-restored; cat /workspace/bk-restored/link; ls -la /workspace/bk-restored")
		return out, strings.Contains(out, markerText)
	}},
	{"snapshot and fork of planted symlinks", "snapshots tar the upper directory without following links", func(t *testing.T, e *escapeEnv) (string, bool) {
		mustExec(t, e.a, "ln -sfn "+e.marker+" /workspace/snap-link && ln -sfn "+filepath.Dir(e.marker)+" /workspace/snap-dir")
		snap, err := e.a.Snapshot(ctxT(t, 5*time.Minute))
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		c := sandbox(t, "e2e-esc-snap", &client.SandboxOptions{InstanceType: "lite", Snapshot: snap.ID})
		out := execAll(t, c, "cat /workspace/snap-link; ls /workspace/snap-dir | head; grep -rs "+markerText+" /workspace")
		return out, strings.Contains(out, markerText)
	}},
	// Network.
	{"reach hutchd's API via the gateway", "nftables input chain: only redirected or established flows from sandboxes", tcpTry(func(e *escapeEnv) string { return e.gateway }, func(e *escapeEnv) int { return e.apiPort })},
	{"reach hutchd's API via 127.0.0.1", "own network namespace (its loopback is the sandbox's)", tcpTry(fixed("127.0.0.1"), func(e *escapeEnv) int { return e.apiPort })},
	{"reach a host service on the gateway", "nftables input chain", tcpTry(func(e *escapeEnv) string { return e.gateway }, func(e *escapeEnv) int { return e.hostPort })},
	{"reach the host's loopback-only service via the gateway", "the service listens on 127.0.0.1 only (the sandbox's 127.0.0.1 is its own); nftables input chain", tcpTry(func(e *escapeEnv) string { return e.gateway }, func(e *escapeEnv) int { return e.loPort })},
	{"reach the host's ssh port", "nftables input chain", tcpTry(func(e *escapeEnv) string { return e.gateway }, fixed(22))},
	{"reach the egress proxy port directly", "nftables input chain (only redirected flows reach the proxy)", tcpTry(func(e *escapeEnv) string { return e.gateway }, fixed(mustAtoi(httpPort)))},
	{"reach another sandbox", "nftables forward chain drops sandbox-to-sandbox traffic", tcpTry(func(e *escapeEnv) string { return e.addrB }, fixed(8080))},
	{"reach another sandbox's gateway", "nftables input chain", tcpTry(func(e *escapeEnv) string { return e.gatewayB }, func(e *escapeEnv) int { return e.hostPort })},
	{"reach a private range (TCP 10.0.0.1:5432)", "nftables redirects TCP to ports other than 80/443 to hutchd's other-port listener, which resets it: no name was resolved to the address through hutchd's DNS, and the floor refuses private ranges", tcpTry(fixed("10.0.0.1"), fixed(5432))},
	{"reach a private range (TCP 192.168.1.1:8080)", "the other-port listener resets it (no name resolved to it; the floor refuses private ranges)", tcpTry(fixed("192.168.1.1"), fixed(8080))},
	{"reach the metadata address (TCP 169.254.169.254:8080)", "the other-port listener resets it (no name resolved to it; the floor refuses link-local addresses)", tcpTry(fixed("169.254.169.254"), fixed(8080))},
	{"HTTP to the metadata address", "egress proxy: raw-IP and link-local destinations refused", httpTry(fixed("http://169.254.169.254/latest/meta-data/"))},
	{"HTTP to hutchd's API on 127.0.0.1", "egress proxy: raw-IP and loopback destinations refused", httpTry(func(e *escapeEnv) string { return fmt.Sprintf("http://127.0.0.1:%d/v1/sandboxes", e.apiPort) })},
	{"HTTP to a private range", "egress proxy: raw-IP and private destinations refused", httpTry(fixed("http://10.0.0.1/"))},
	{"HTTP to localhost by name", "the name resolves to the sandbox's own loopback (nothing listens); the proxy refuses loopback", httpTry(fixed("http://localhost/"))},
	{"HTTP to another sandbox", "egress proxy: raw-IP and private destinations refused", httpTry(func(e *escapeEnv) string { return "http://" + e.addrB + ":8080/" })},
	// Secrets.
	{"read hutchd's state directory and token", "own mount namespace: the state dir is not mounted in", func(t *testing.T, e *escapeEnv) (string, bool) {
		out := execAll(t, e.a, "ls "+d.StateDir+" 2>&1; cat "+filepath.Join(d.StateDir, "token")+" "+e.marker+" 2>&1")
		return out, strings.Contains(out, d.Token) || strings.Contains(out, markerText) || strings.Contains(out, "hutchd.log")
	}},
	{"find the API token in the environment or files", "never passed into sandboxes", func(t *testing.T, e *escapeEnv) (string, bool) {
		// A prefix of the token, sent reversed so that the command line (which the agent may
		// keep in files) never holds it.
		rev := []byte(d.Token[:24])
		slices.Reverse(rev)
		out := execAll(t, e.a, "p=$(python3 -c 'import sys; print(sys.argv[1][::-1])' "+string(rev)+"); for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null | grep -c $p; grep -rlsI $p /etc /root /run /workspace /tmp /home /.hutch 2>/dev/null | head")
		return "matches: " + out, strings.TrimSpace(out) != "0"
	}},
}

// gvisorBlockedBy names what blocks an attempt on the gvisor runtime where that differs from
// runc's column: there the Sentry is the kernel the sandbox talks to, it applies the same
// seccomp profile (runsc --oci-seccomp) and capability set, and its /proc, /sys and /dev are
// its own. Attempts not listed are blocked by the same layers (network: the same namespace and
// nftables; hutchd's APIs: the same agent and archive code).
var gvisorBlockedBy = map[string]string{
	"clone3 (flags unreadable by seccomp)":    "seccomp (SCMP_ACT_TRACE: ENOSYS, no tracer can attach); libc falls back to clone",
	"open /dev/mem, /dev/kmem, /dev/port":     "the Sentry's /dev has no such devices",
	"mknod /dev/mem and open it":              "no CAP_MKNOD; the Sentry has no host device files",
	"mknod the host's disk and open it":       "no CAP_MKNOD; the Sentry has no host device files (no /proc/partitions either)",
	"only the standard devices in /dev":       "the Sentry's /dev: the standard devices (and /dev/char links to them) and its own fuse, unusable since mount is refused",
	"write a cgroup release_agent":            "the Sentry's cgroupfs, read-only, has no release_agent",
	"write /proc/sysrq-trigger and /proc/sys": "the Sentry's /proc (read-only /proc/sys, no sysrq-trigger)",
	"raw socket":                                          "seccomp; no CAP_NET_RAW (runsc without --net-raw)",
	"see processes outside the sandbox":                   "the Sentry knows only the sandbox's tasks",
	"ptrace hutchd's PID number":                          "seccomp; the Sentry knows only the sandbox's tasks",
	"overwrite the running binary through /proc/self/exe": "/proc/self/exe is the sandbox's own file (no ETXTBSY in gVisor); runsc never runs inside the sandbox",
	"read hutchd's state directory and token":             "the gofer serves only the sandbox's root and mounts",
	// The Sentry refused these two before the agent was non-dumpable too: its ptrace attach
	// check (which /proc/<pid>/mem needs, environ not) lets a task attach only to its
	// descendants.
	"read the agent's memory (/proc/<agent>/mem)":  "non-dumpable agent processes, no CAP_SYS_PTRACE; the Sentry's ptrace attach check (descendants only)",
	"write the agent's memory (/proc/<agent>/mem)": "non-dumpable agent processes, no CAP_SYS_PTRACE; the Sentry's ptrace attach check (descendants only)",
}

// escapeRow is one line of the table in docs/SECURITY.md.
type escapeRow struct{ runtime, name, blockedBy, result string }

// TestEscape runs every escape attempt from inside a real sandbox and asserts it was blocked.
// With HUTCH_ESCAPE_TABLE=<file> it writes the results as a Markdown table: between the
// markers of docs/SECURITY.md when given that file (HUTCH_ESCAPE_TABLE=$PWD/docs/SECURITY.md).
func TestEscape(t *testing.T) {
	requireEnv(t)
	parallel(t)
	if goruntime.GOARCH != "amd64" {
		t.Skip("the system call numbers are x86-64's")
	}
	var mu sync.Mutex
	var rows []escapeRow
	for _, rt := range testRuntimes() {
		t.Run(rt, func(t *testing.T) {
			requireRuntime(t, rt)
			e := newEscapeEnv(t, rt)
			runtimeBin := lookRunc(t)
			if rt == "gvisor" {
				runtimeBin = lookBin(t, "runsc")
			}
			runcSum, initSum := fileSum(t, runtimeBin), fileSum(t, filepath.Join(bins, "hutch-init"))
			for _, c := range escapeCases {
				t.Run(c.name, func(t *testing.T) {
					evidence, escaped := c.run(t, e)
					result := "blocked"
					if escaped {
						result = "ESCAPED"
						t.Errorf("not blocked: %s", evidence)
					}
					t.Logf("%s: %s", result, oneLine(evidence))
					blockedBy := c.blockedBy
					if by, ok := gvisorBlockedBy[c.name]; ok && rt == "gvisor" {
						blockedBy = by
					}
					mu.Lock()
					rows = append(rows, escapeRow{rt, c.name, blockedBy, result})
					mu.Unlock()
				})
			}
			if fileSum(t, runtimeBin) != runcSum || fileSum(t, filepath.Join(bins, "hutch-init")) != initSum {
				t.Errorf("the %s or hutch-init binary on the host changed", runtimeBin)
			}
		})
	}
	if path := os.Getenv("HUTCH_ESCAPE_TABLE"); path != "" {
		writeEscapeTable(t, path, rows)
	}
}

func newEscapeEnv(t *testing.T, rt string) *escapeEnv {
	t.Helper()
	// The default type (half a CPU): no attempt depends on the size, and in lite gVisor
	// sandboxes (1/16 of a CPU) each attempt's Python took about 4 s to start, 227 s in all.
	a := sandbox(t, "e2e-esc-a-"+rt, withRuntime(&client.SandboxOptions{InstanceType: "standard-1"}, rt))
	b := sandbox(t, "e2e-esc-b-"+rt, withRuntime(&client.SandboxOptions{InstanceType: "standard-1"}, rt))
	infoA, err := a.Info(ctxT(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	infoB, err := b.Info(ctxT(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Exec(ctxT(t, time.Minute), "nohup python3 -m http.server 8080 >/dev/null 2>&1 &", nil); err != nil {
		t.Fatal(err)
	}
	waitListening(t, b, 8080)
	for path, script := range map[string]string{"/tmp/sys.py": sysScript, "/tmp/agent.py": agentScript} {
		if err := a.WriteFile(ctxT(t, time.Minute), path, []byte(script)); err != nil {
			t.Fatal(err)
		}
	}
	hostPort, hits := hostListener(t)
	loPort, loHits := loopbackListener(t)
	t.Cleanup(func() {
		if n := hits.Load() + loHits.Load(); n != 0 {
			t.Errorf("host listeners saw %d connections from the sandbox", n)
		}
	})
	marker := filepath.Join(os.TempDir(), "hutch-escape-marker")
	if err := os.WriteFile(marker, []byte(markerText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(marker) })
	return &escapeEnv{a: a, b: b, addrB: infoB.Address, gateway: gatewayOf(t, infoA.Address), gatewayB: gatewayOf(t, infoB.Address), apiPort: mustPort(t, d.Listen),
		hostPort: hostPort, loPort: loPort, hutchdPID: hutchdPID(t), marker: marker, secret: "op-token-" + rand.Text()}
}

// loopbackListener listens on the host's 127.0.0.1 only and counts connections.
func loopbackListener(t *testing.T) (port int, hits *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	hits = &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, hits
}

// hutchdPID finds the test hutchd's process on the host by its state directory argument.
func hutchdPID(t *testing.T) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), "hutchd") && strings.Contains(string(b), d.StateDir) {
			return pid
		}
	}
	t.Fatal("the test hutchd's process was not found")
	return 0
}

func lookRunc(t *testing.T) string { return lookBin(t, "runc") }

func lookBin(t *testing.T, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func fileSum(t *testing.T, path string) [32]byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// Markers of the generated table in docs/SECURITY.md.
const (
	tableBegin = "<!-- escape-table:begin (generated by TestEscape) -->"
	tableEnd   = "<!-- escape-table:end -->"
)

// writeEscapeTable writes rows as a Markdown table to path: between the markers when the file
// has them (docs/SECURITY.md), else as the whole file.
func writeEscapeTable(t *testing.T, path string, rows []escapeRow) {
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].runtime < rows[j].runtime })
	var sb strings.Builder
	sb.WriteString("| Runtime | Attempt | Blocked by | Result |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", r.runtime, r.name, r.blockedBy, r.result)
	}
	table := sb.String()
	if old, err := os.ReadFile(path); err == nil {
		if before, rest, ok := strings.Cut(string(old), tableBegin); ok {
			if _, after, ok := strings.Cut(rest, tableEnd); ok {
				table = before + tableBegin + "\n" + table + tableEnd + after
			}
		}
	}
	if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
		t.Error(err)
	}
}
