package runsc_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
)

// counterArgs count in a loop into /tmp/c, 20 times a second.
var counterArgs = []string{"sh", "-c", "i=0; while :; do i=$((i+1)); echo $i > /tmp/c; sleep 0.05; done"}

// TestCheckpointRestore checkpoints a container (--network=none, no host sockets: what this
// runsc can save) whose shell counts in a loop, restores it from the image with the same spec,
// and checks that the counter continued rather than restarted and that the clock inside is
// the host's.
func TestCheckpointRestore(t *testing.T) {
	e := newEnvNet(t, "none")
	ctx := ctxT(t)
	id := newID(t)
	spec := e.spec(t, id)
	spec.Args = counterArgs
	if _, err := e.rt.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	counter := func() int {
		t.Helper()
		_, out := e.exec(t, id, "cat", "/tmp/c")
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("counter %q", out)
		}
		return n
	}
	time.Sleep(time.Second)
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
	time.Sleep(500 * time.Millisecond)
	if after := counter(); after <= before {
		t.Errorf("counter %d after restore, %d before: it restarted or stopped", after, before)
	}
	_, out := e.exec(t, id, "date", "+%s")
	inside, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if d := time.Since(time.Unix(inside, 0)); err != nil || d < -2*time.Second || d > 2*time.Second {
		t.Errorf("date inside after restore = %q (%v off the host's)", out, d)
	}
	if _, err := e.rt.Restore(ctx, spec, img); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("Restore onto a running container = %v, want ErrAlreadyExists", err)
	}
	if err := e.rt.Delete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	assertGone(t, e.rt, id)
	if _, err := e.rt.Restore(ctx, spec, filepath.Join(e.dir, "none")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Restore without an image = %v, want ErrNotFound", err)
	}
}

// TestCheckpointRefusals checks the two states this runsc cannot save, which every hutch
// sandbox on gVisor has (so hutchd's sleep keeps the disk only): host networking
// (--network=host) and a unix socket bound in a host directory (--host-uds=create, the
// agent's socket). Checkpoint fails with runsc's reason.
func TestCheckpointRefusals(t *testing.T) {
	for _, c := range []struct {
		name, network, want string
		uds                 bool
	}{
		{"hostinet", "host", "hostinet", false},
		{"bound host socket", "none", "bound host socket", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnvNet(t, c.network)
			ctx := ctxT(t)
			id := newID(t)
			spec := e.spec(t, id)
			if c.network == "host" {
				ns := "hutch-" + id
				if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
					t.Fatalf("ip netns add: %v: %s", err, out)
				}
				t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", ns).Run() })
				spec.NetNSPath = "/var/run/netns/" + ns
			}
			if c.uds {
				sockDir := filepath.Join(e.dir, "sock")
				if err := os.MkdirAll(sockDir, 0o700); err != nil {
					t.Fatal(err)
				}
				spec.Mounts = []runtime.Mount{{Source: sockDir, Destination: "/run/agent"}}
				spec.Args = []string{"python3", "-c", `import socket, time; u = socket.socket(socket.AF_UNIX); u.bind("/run/agent/a.sock"); u.listen(1); time.sleep(3600)`}
			}
			if _, err := e.rt.Start(ctx, spec); err != nil {
				t.Fatal(err)
			}
			if c.uds {
				waitFile(t, filepath.Join(e.dir, "sock", "a.sock"))
			}
			err := e.rt.Checkpoint(ctx, id, filepath.Join(e.dir, "ckpt"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Checkpoint = %v; want runsc's refusal naming %q", err, c.want)
			}
			// A refusal found before saving (hostinet) leaves the container running; one found
			// while saving (the socket) stops it: the Sentry's save panics half-way.
			want := runtime.StatusRunning
			if c.uds {
				want = runtime.StatusStopped
			}
			if st, err := e.rt.State(ctx, id); err != nil || st.Status != want {
				t.Errorf("after the refused checkpoint: %+v, %v; want %s", st, err, want)
			}
		})
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s never appeared", path)
}
