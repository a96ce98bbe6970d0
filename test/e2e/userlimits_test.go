package e2e

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/testutil"
)

// limitsPy exhausts or probes, inside a sandbox, the kernel's per-user counters a user
// namespace's owner is charged with: inotify instances, POSIX message queue bytes and queued
// real-time signals.
//
//	hog CHILDREN INOTIFY MQ SIG: CHILDREN processes, each as a user of its own (so that one
//	user's limit does not stop the sandbox before its namespace's owner is exhausted), make up
//	to INOTIFY inotify instances, MQ queues (unlinked at once: charged while open) and SIG
//	queued signals, append "child I ino=N/ERR mq=N/ERR sig=N/ERR" to /tmp/hog.out and hold
//	everything until killed.
//	probe: one of each, printed as "ino=ok mq=ok sig=ok" (or the errno's name).
const limitsPy = `import ctypes, errno, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
try:
    mq_open, mq_unlink = libc.mq_open, libc.mq_unlink
except AttributeError:
    rt = ctypes.CDLL("librt.so.1", use_errno=True)
    mq_open, mq_unlink = rt.mq_open, rt.mq_unlink
mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
libc.sigqueue.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
SIG = signal.SIGRTMIN + 4
signal.pthread_sigmask(signal.SIG_BLOCK, {SIG})

def err():
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))

def inotify(n):
    for i in range(n):
        if libc.inotify_init1(os.O_CLOEXEC) < 0:
            return "%d/%s" % (i, err())
    return "%d/none" % n

def mq(n, tag):
    for i in range(n):
        name = ("/hutch-%s-%d-%d" % (tag, os.getpid(), i)).encode()
        if mq_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o600, None) < 0:
            return "%d/%s" % (i, err())
        mq_unlink(name)
    return "%d/none" % n

def sig(n):
    for i in range(n):
        if libc.sigqueue(os.getpid(), SIG, None) != 0:
            return "%d/%s" % (i, err())
    return "%d/none" % n

if sys.argv[1] == "probe":
    r = [inotify(1), mq(1, "probe"), sig(1)]
    print(" ".join("%s=%s" % (k, "ok" if v == "1/none" else v) for k, v in zip(["ino", "mq", "sig"], r)))
    sys.exit(0)
children, ino_n, mq_n, sig_n = map(int, sys.argv[2:6])
for c in range(children):
    if os.fork() == 0:
        os.setgroups([])
        os.setgid(3000 + c)
        os.setuid(3000 + c)
        line = "child %d ino=%s mq=%s sig=%s\n" % (c, inotify(ino_n), mq(mq_n, "hog"), sig(sig_n))
        with open("/tmp/hog.out", "a") as f:
            f.write(line)
        while True:
            time.sleep(3600)
while True:
    time.sleep(3600)
`

// startHog runs limitsPy's hog in sb in the background and waits for its children's lines.
func startHog(t *testing.T, sb *client.Sandbox, children, ino, mq, sig int) string {
	t.Helper()
	ctx := ctxT(t, 3*time.Minute)
	if err := sb.WriteFile(ctx, "/tmp/limits.py", []byte(limitsPy)); err != nil {
		t.Fatal(err)
	}
	mustExec(t, sb, fmt.Sprintf("rm -f /tmp/hog.out; touch /tmp/hog.out; chmod 666 /tmp/hog.out; nohup python3 /tmp/limits.py hog %d %d %d %d >/tmp/hog.log 2>&1 &", children, ino, mq, sig))
	var out string
	if !testutil.Poll(t, 200*time.Millisecond, 2*time.Minute, func() bool {
		out = mustExec(t, sb, "cat /tmp/hog.out")
		return strings.Count(out, "\n") >= children
	}) {
		t.Fatalf("hog did not report: %q; log %q", out, mustExec(t, sb, "cat /tmp/hog.log"))
	}
	return out
}

// hogged reports whether some child of a hog's report hit the errno of each counter: the
// sandbox reached a limit, so the probes that follow test what that limit shares.
func hogged(report string) (ino, mq, sig bool) {
	for _, f := range strings.Fields(report) {
		switch {
		case strings.HasPrefix(f, "ino=") && strings.HasSuffix(f, "/EMFILE"):
			ino = true
		case strings.HasPrefix(f, "mq=") && strings.HasSuffix(f, "/EMFILE"):
			mq = true
		case strings.HasPrefix(f, "sig=") && strings.HasSuffix(f, "/EAGAIN"):
			sig = true
		}
	}
	return ino, mq, sig
}

// hostProbe tries one inotify instance, one message queue and one queued real-time signal as
// this process (host root) and returns what failed.
func hostProbe(t *testing.T) []string {
	t.Helper()
	var failed []string
	if fd, err := unix.InotifyInit1(unix.IN_CLOEXEC); err != nil {
		failed = append(failed, "inotify_init1: "+err.Error())
	} else {
		unix.Close(fd)
	}
	name, _ := unix.BytePtrFromString("hutch-e2e-probe-" + strconv.Itoa(os.Getpid()))
	fd, _, e := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(name)), unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_CLOEXEC, 0o600, 0, 0, 0)
	if e != 0 {
		failed = append(failed, "mq_open: "+e.Error())
	} else {
		unix.Close(int(fd))
		unix.Syscall(unix.SYS_MQ_UNLINK, uintptr(unsafe.Pointer(name)), 0, 0)
	}
	// A real-time signal the Go runtime catches and drops (an ignored one would never be
	// queued, so never charged).
	sig := syscall.Signal(40) // SIGRTMIN+6 of glibc's numbering (the kernel's SIGRTMIN is 32)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sig)
	defer signal.Stop(ch)
	var info [32]int32 // siginfo_t: signo, errno, code, pad, pid, uid, value
	info[0], info[2], info[4], info[5] = int32(sig), -1 /* SI_QUEUE */, int32(os.Getpid()), 0
	if _, _, e := unix.Syscall(unix.SYS_RT_SIGQUEUEINFO, uintptr(os.Getpid()), uintptr(sig), uintptr(unsafe.Pointer(&info))); e != 0 {
		failed = append(failed, "rt_sigqueueinfo: "+e.Error())
	} else {
		<-ch
	}
	return failed
}

// TestPerUserKernelLimits: a sandbox that uses up the kernel's per-user limits (inotify
// instances, message queue bytes, queued signals), as every user it can become, leaves them
// intact for another sandbox and for host root. On runc the kernel charges each sandbox to
// its user namespace's owner, its own range's root; gVisor's kernel keeps them to itself.
func TestPerUserKernelLimits(t *testing.T) {
	requireEnv(t)
	withUserNS(t)
	maxIno, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances")
	if err != nil {
		t.Fatal(err)
	}
	inoLimit, _ := strconv.Atoi(strings.TrimSpace(string(maxIno)))
	const children = 8
	// Each child may hold up to 65535 descriptors (the sandbox's RLIMIT_NOFILE).
	if inoLimit <= 0 || inoLimit > children*60000 {
		t.Skipf("fs.inotify.max_user_instances = %d: too many for a bounded test", inoLimit)
	}
	perChild := min(inoLimit+16, 60000)
	// 8 x 20000 queued signals pass hutchd's RLIMIT_SIGPENDING (the namespace's bound, ~nproc)
	// on a host of ordinary size; a sandbox's own users stop at its RLIMIT_SIGPENDING each.
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_SIGPENDING, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Cur > children*20000 {
		t.Skipf("RLIMIT_SIGPENDING %d: too many signals for a bounded test", rl.Cur)
	}
	if failed := hostProbe(t); len(failed) > 0 {
		t.Fatalf("host root cannot even start: %v", failed)
	}

	b := sandbox(t, "limits-b", &client.SandboxOptions{Runtime: "runc"})
	check := func(t *testing.T, who string) {
		t.Helper()
		if failed := hostProbe(t); len(failed) > 0 {
			t.Errorf("host root after %s used its limits up: %v", who, failed)
		}
		if got := strings.TrimSpace(mustExec(t, b, "python3 /tmp/limits.py probe")); got != "ino=ok mq=ok sig=ok" {
			t.Errorf("sandbox limits-b after %s used its limits up: %s", who, got)
		}
		// The product's watch: the agent's inotify instance in limits-b.
		ctx := ctxT(t, time.Minute)
		w, err := b.Watch(ctx, "/tmp", client.WatchOptions{NoRecursive: true})
		if err != nil {
			t.Errorf("watch in limits-b after %s used its limits up: %v", who, err)
			return
		}
		defer w.Close()
		name := fmt.Sprintf("/tmp/after-%d", time.Now().UnixNano())
		mustExec(t, b, "touch "+name)
		for ev, err := range w.Events() {
			if err != nil {
				t.Errorf("watch in limits-b after %s used its limits up: %v", who, err)
				return
			}
			if ev.Kind == client.WatchKindEvent && ev.Path == name {
				return
			}
		}
		t.Errorf("watch in limits-b stopped before %s was seen", name)
	}
	if err := b.WriteFile(ctxT(t, time.Minute), "/tmp/limits.py", []byte(limitsPy)); err != nil {
		t.Fatal(err)
	}

	t.Run("runc", func(t *testing.T) {
		a := sandbox(t, "limits-a", &client.SandboxOptions{Runtime: "runc"})
		report := startHog(t, a, children, perChild, 256, 20000)
		t.Logf("limits-a:\n%s", report)
		if ino, mq, sig := hogged(report); !ino || !mq || !sig {
			t.Fatalf("limits-a did not reach its limits (inotify %v, mqueue %v, signals %v):\n%s", ino, mq, sig, report)
		}
		check(t, "limits-a (runc)")
		// limits-a is at its limit, not beyond: its own next instance fails.
		if got := strings.TrimSpace(mustExec(t, a, "python3 /tmp/limits.py probe")); !strings.Contains(got, "ino=0/EMFILE") {
			t.Errorf("limits-a's own probe = %q; want its inotify instances used up", got)
		}
	})
	t.Run("gvisor", func(t *testing.T) {
		if !have("runsc") {
			t.Skip("runsc not installed")
		}
		g := sandbox(t, "limits-g", &client.SandboxOptions{Runtime: "gvisor"})
		report := startHog(t, g, 2, perChild, 64, 60000)
		t.Logf("limits-g:\n%s", report)
		check(t, "limits-g (gVisor)")
	})
}
