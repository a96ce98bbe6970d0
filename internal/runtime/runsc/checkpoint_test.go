package runsc_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/runsc"
	"github.com/hutchdev/hutch/internal/testutil"
)

// counterArgs count in a loop into /tmp/c, 20 times a second, and serve on 127.0.0.1:7777
// (a host socket: --network=host) and on a unix socket (inside the Sentry).
var counterArgs = []string{"python3", "-u", "-c", `
import socket, threading, time
def serve(s, msg):
    while True:
        c, _ = s.accept(); c.sendall(msg); c.close()
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(("127.0.0.1", 7777)); t.listen(8)
u = socket.socket(socket.AF_UNIX); u.bind("/tmp/u.sock"); u.listen(8)
threading.Thread(target=serve, args=(t, b"tcp-ok"), daemon=True).start()
threading.Thread(target=serve, args=(u, b"unix-ok"), daemon=True).start()
i = 0
while True:
    i += 1
    open("/tmp/c.new", "w").write(str(i)); __import__("os").rename("/tmp/c.new", "/tmp/c"); time.sleep(0.05)
`}

// TestCheckpointRestore checkpoints a sandbox as hutchd runs it (--network=host in a network
// namespace of its own) whose Python process counts in a loop and serves on TCP and on a unix
// socket, restores it from the image with the same spec, and checks that the counter
// continued rather than restarted, that both servers answer again (the TCP listener is a
// host socket gVisor binds again at restore) and that the clock inside is the host's.
func TestCheckpointRestore(t *testing.T) {
	e := newEnvNet(t, "host")
	if err := e.rt.CheckpointSupport(); err != nil {
		t.Skipf("this runsc cannot checkpoint a hutch sandbox: %v", err)
	}
	ctx := ctxT(t)
	id := newID(t)
	spec := e.spec(t, id)
	// The restored Sentry starts its threads and ptrace stubs again, all counted by the pids
	// controller: 64 is too few for it (the instance types give 512 and more).
	spec.Resources.Pids = 512
	ns := "hutch-" + id
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", ns).Run() })
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	spec.NetNSPath = "/var/run/netns/" + ns
	spec.Args = counterArgs
	if _, err := e.rt.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	counter := func() int {
		t.Helper()
		var n int
		var last string
		if !testutil.Poll(t, 100*time.Millisecond, time.Minute, func() bool {
			var out bytes.Buffer
			code, err := e.rt.Exec(ctx, id, []string{"cat", "/tmp/c"}, &out, &out)
			v, aerr := strconv.Atoi(strings.TrimSpace(out.String()))
			n, last = v, fmt.Sprintf("exit %d, %q, %v", code, out.String(), err)
			return err == nil && code == 0 && aerr == nil
		}) {
			t.Fatalf("counter: %s", last)
		}
		return n
	}
	servers := func(when string) {
		t.Helper()
		out, err := exec.Command("ip", "netns", "exec", ns, "python3", "-c",
			`import socket; s = socket.create_connection(("127.0.0.1", 7777)); print(s.recv(100).decode(), end="")`).CombinedOutput()
		if err != nil || string(out) != "tcp-ok" {
			t.Errorf("%s: TCP server: %q, %v", when, out, err)
		}
		var uout bytes.Buffer
		code, err := e.rt.Exec(ctx, id, []string{"python3", "-c",
			`import socket; s = socket.socket(socket.AF_UNIX); s.connect("/tmp/u.sock"); print(s.recv(100).decode(), end="")`}, &uout, &uout)
		if err != nil || code != 0 || uout.String() != "unix-ok" {
			t.Errorf("%s: unix server: exit %d, %q, %v", when, code, uout.String(), err)
		}
	}
	counter()
	time.Sleep(time.Second)
	servers("before")
	before := counter()

	img := filepath.Join(e.dir, "ckpt")
	started := time.Now()
	if err := e.rt.Checkpoint(ctx, id, img); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	t.Logf("checkpoint took %v", time.Since(started).Round(time.Millisecond))
	if err := e.rt.Delete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the clock moves on while the sandbox is saved
	started = time.Now()
	if _, err := e.rt.Restore(ctx, spec, img); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	t.Logf("restore took %v", time.Since(started).Round(time.Millisecond))
	after := counter()
	if after < before {
		t.Errorf("counter %d after restore, %d before: it restarted", after, before)
	}
	var later int
	if !testutil.Poll(t, 100*time.Millisecond, 30*time.Second, func() bool { later = counter(); return later > after }) {
		t.Errorf("counter %d, then %d: it stopped after the restore", after, later)
	}
	servers("after restore")
	var dout bytes.Buffer
	if _, err := e.rt.Exec(ctx, id, []string{"date", "+%s"}, &dout, &dout); err != nil {
		t.Fatal(err)
	}
	inside, err := strconv.ParseInt(strings.TrimSpace(dout.String()), 10, 64)
	if d := time.Since(time.Unix(inside, 0)); err != nil || d < -2*time.Second || d > 2*time.Second {
		t.Errorf("date inside after restore = %q (%v off the host's)", dout.String(), d)
	}
	if _, err := e.rt.Restore(ctx, spec, img); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("Restore onto a running container = %v, want ErrAlreadyExists", err)
	}
	if err := e.rt.Delete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	e.AssertGone(t, id)
	if _, err := e.rt.Restore(ctx, spec, filepath.Join(e.dir, "none")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Restore without an image = %v, want ErrNotFound", err)
	}
}

// TestCheckpointSupport: the binary's gVisor module version decides; Debian's runsc
// (20221219, no module version) cannot save host network sockets.
func TestCheckpointSupport(t *testing.T) {
	for _, c := range []struct {
		v, want string
		ok      bool
	}{
		{runsc.MinCheckpointVersion, "20260905035102", true},
		{"v0.0.0-20221219000000-abcdef012345", "20221219000000", true},
		{"v1.2.3-pre.0.20260101000000-abcdef012345", "20260101000000", true},
		{"(devel)", "", false},
		{"", "", false},
		{"v0.0.0-2026-abc", "", false},
	} {
		if got, ok := runsc.PseudoVersionTime(c.v); got != c.want || ok != c.ok {
			t.Errorf("pseudoVersionTime(%q) = %q, %v; want %q, %v", c.v, got, ok, c.want, c.ok)
		}
	}
	if _, err := os.Stat("/usr/bin/runsc"); err == nil {
		if err := runsc.ProbeCheckpoint("/usr/bin/runsc"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
			t.Errorf("Debian's runsc: %v, want ErrFailedPrecondition", err)
		}
	}
	if p, err := exec.LookPath("runsc"); err == nil {
		t.Logf("runsc on PATH (%s): %v", p, runsc.ProbeCheckpoint(p))
	}
	self, _ := os.Executable() // a Go binary without gVisor in it
	if err := runsc.ProbeCheckpoint(self); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("a binary without gVisor: %v, want ErrFailedPrecondition", err)
	}
}
