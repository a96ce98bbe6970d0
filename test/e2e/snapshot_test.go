package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

// diskScript changes a sandbox's disk in every way a snapshot must keep: content, modes
// (setuid, setgid), owners, a symlink, a hard link, a FIFO, a 4 MiB file, the deletion of an
// image file and of an image directory, and an image directory replaced by a new one (opaque).
const diskScript = `set -e
mkdir -p /workspace/s && cd /workspace/s
printf 'hello snapshot\n' > a.txt
chmod 640 a.txt && chown 1234:5678 a.txt
ln -s a.txt link
ln a.txt hard
mkdir d && chown 1234:5678 d && chmod 2750 d
mkfifo pipe
head -c 4194304 /dev/urandom > big
sha256sum big | cut -d' ' -f1 > big.sum
cp /bin/true /usr/local/bin/mytrue && chmod 4755 /usr/local/bin/mytrue
rm /etc/motd
rm -rf /usr/share/doc/bash
rm -rf /etc/skel && mkdir /etc/skel && echo new > /etc/skel/only
`

// diskCheck prints what diskScript made, as seen inside a sandbox.
const diskCheck = `cd /workspace/s && cat a.txt && stat -c '%a %u:%g %h' a.txt && readlink link &&
[ "$(stat -c %i a.txt)" = "$(stat -c %i hard)" ] && echo same-inode &&
stat -c '%a %u:%g %F' d && { stat -c '%F' pipe 2>/dev/null || echo no-fifo; } && [ "$(sha256sum big | cut -d' ' -f1)" = "$(cat big.sum)" ] && echo big-ok &&
stat -c '%a' /usr/local/bin/mytrue &&
{ test -e /etc/motd && echo motd-back || echo motd-gone; } &&
{ test -e /usr/share/doc/bash && echo bashdoc-back || echo bashdoc-gone; } &&
ls -A /etc/skel`

const diskWant = "hello snapshot\n640 1234:5678 2\na.txt\nsame-inode\n2750 1234:5678 directory\nfifo\nbig-ok\n4755\nmotd-gone\nbashdoc-gone\nonly\n"

func TestSnapshotRoundTrip(t *testing.T) {
	requireEnv(t)
	parallel(t)
	src := sandbox(t, "e2e-snap-src", &client.SandboxOptions{InstanceType: "basic", EnvVars: map[string]string{"SNAP_VAR": "v1"}})
	// The image really has what the script deletes.
	mustExec(t, src, "test -f /etc/motd && test -d /usr/share/doc/bash && test -f /etc/skel/.bashrc")
	mustExec(t, src, diskScript)
	if got := mustExec(t, src, diskCheck); got != diskWant {
		t.Fatalf("source before snapshot:\n%s\nwant:\n%s", got, diskWant)
	}
	// A process keeps writing during the snapshot: the sandbox is frozen, then goes on.
	mustExec(t, src, "nohup sh -c 'while :; do date +%s%N >> /tmp/ticks; sleep 0.01; done' >/dev/null 2>&1 &")

	start := time.Now()
	snap, err := src.Snapshot(ctxT(t, 5*time.Minute))
	if err != nil {
		t.Fatalf("Snapshot: %v\n%s", err, d.LogTail())
	}
	t.Logf("snapshot of a running sandbox (4 MiB file + small changes): %v, %d layer(s), %d bytes compressed",
		time.Since(start).Round(time.Millisecond), len(snap.Layers), snap.SizeBytes)
	if !strings.HasPrefix(snap.ID, "sha256-") || len(snap.ID) != 71 || snap.SandboxID != src.ID() || len(snap.Layers) != 1 ||
		snap.SizeBytes <= 0 || snap.Config.EnvVars["SNAP_VAR"] != "v1" || snap.Config.InstanceType != "basic" {
		t.Fatalf("snapshot = %+v", snap)
	}
	got, err := d.Client().GetSnapshot(ctxT(t, time.Minute), snap.ID)
	if err != nil || got.ID != snap.ID {
		t.Fatalf("GetSnapshot = %+v, %v", got, err)
	}
	// The source runs on after the thaw, and its later changes are not in the snapshot.
	ticks := mustExec(t, src, "wc -l < /tmp/ticks")
	if !testutil.Poll(t, 50*time.Millisecond, 30*time.Second, func() bool { return mustExec(t, src, "wc -l < /tmp/ticks") != ticks }) {
		t.Errorf("the source's writer did not go on after the snapshot (%s lines)", strings.TrimSpace(ticks))
	}
	mustExec(t, src, "echo later > /workspace/s/later && echo changed > /workspace/s/a.txt")

	start = time.Now()
	cp := sandbox(t, "e2e-snap-copy", &client.SandboxOptions{Snapshot: snap.ID})
	t.Logf("new sandbox from the snapshot (layer cached): %v", time.Since(start).Round(time.Millisecond))
	want := diskWant
	if defaultRuntime == "gvisor" {
		// gVisor keeps a FIFO made in the sandbox in the Sentry's memory (its gofer does not
		// create it on the host), so the disk, and the snapshot, never hold it.
		want = strings.Replace(want, "\nfifo\n", "\nno-fifo\n", 1)
	}
	if got := mustExec(t, cp, diskCheck); got != want {
		t.Errorf("sandbox from snapshot:\n%s\nwant:\n%s", got, want)
	}
	if got := mustExec(t, cp, "test -e /workspace/s/later && echo leaked || echo absent; echo $SNAP_VAR"); got != "absent\nv1\n" {
		t.Errorf("later change / env in the copy: %q", got)
	}
	info, err := d.Client().GetSandbox(ctxT(t, time.Minute), cp.ID())
	if err != nil || info.Snapshot != snap.ID || len(info.Layers) != 1 || info.InstanceType != "basic" {
		t.Errorf("copy info = %+v, %v", info, err)
	}

	// A snapshot of the copy stacks a second layer: its own changes, deletions included.
	mustExec(t, cp, "echo child > /workspace/s/child && rm /workspace/s/hard && rm -rf /workspace/s/d")
	snap2, err := cp.Snapshot(ctxT(t, 5*time.Minute))
	if err != nil {
		t.Fatalf("second Snapshot: %v\n%s", err, d.LogTail())
	}
	if len(snap2.Layers) != 2 || snap2.Layers[1].Digest != snap.Layers[0].Digest || len(snap2.ParentLayers) != 1 {
		t.Fatalf("second snapshot layers = %+v", snap2.Layers)
	}
	gc := sandbox(t, "e2e-snap-grandchild", &client.SandboxOptions{Snapshot: snap2.ID})
	// (a.txt's link count still says 2: overlayfs reports the lower inode's count, which the
	// whiteout of "hard" in the upper layer does not change.)
	want = "child\nhello snapshot\nabsent\nabsent\nmotd-gone\n"
	if got := mustExec(t, gc, `cd /workspace/s && cat child a.txt &&
		{ test -e hard && echo present || echo absent; } && { test -e d && echo present || echo absent; } &&
		{ test -e /etc/motd && echo motd-back || echo motd-gone; }`); got != want {
		t.Errorf("sandbox from the two-layer snapshot:\n%s\nwant:\n%s", got, want)
	}

	// A sleeping sandbox is snapshotted without waking it.
	if _, err := src.Sleep(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	snap3, err := src.Snapshot(ctxT(t, 5*time.Minute))
	if err != nil {
		t.Fatalf("Snapshot of a sleeping sandbox: %v", err)
	}
	if info, _ := d.Client().GetSandbox(ctxT(t, time.Minute), src.ID()); info == nil || info.Status != client.SandboxStatus("sleeping") {
		t.Errorf("after snapshot of a sleeping sandbox: %+v", info)
	}
	if snap3.ID == snap.ID {
		t.Error("snapshot after changes has the first snapshot's ID")
	}
	list, err := d.Client().ListSnapshots(ctxT(t, time.Minute), src.ID())
	if err != nil || len(list) < 2 {
		t.Errorf("ListSnapshots(src) = %d, %v", len(list), err)
	}

	// Bad input.
	if _, err := d.Client().Sandbox(ctxT(t, time.Minute), "e2e-snap-bad", &client.SandboxOptions{Snapshot: "sha256-" + strings.Repeat("0", 64)}); !errdefs.IsCode(err, errdefs.CodeSnapshotNotFound) {
		t.Errorf("unknown snapshot: %v", err)
	}
	if _, err := d.Client().Sandbox(ctxT(t, time.Minute), "e2e-snap-bad", &client.SandboxOptions{Snapshot: "latest"}); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
		t.Errorf("malformed snapshot: %v", err)
	}
	if _, err := d.Client().GetSandbox(ctxT(t, time.Minute), "e2e-snap-bad"); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Errorf("a failed create left a sandbox: %v", err)
	}
}

func TestSnapshotForks(t *testing.T) {
	requireEnv(t)
	parallel(t)
	base := sandbox(t, "e2e-snap-fork", &client.SandboxOptions{InstanceType: "lite"})
	mustExec(t, base, "mkdir -p /workspace/w && echo base > /workspace/w/base.txt && head -c 8388608 /dev/urandom > /workspace/w/blob")
	ids := []string{"e2e-snap-fork-fork-1", "e2e-snap-fork-fork-2", "e2e-snap-fork-fork-3", "e2e-snap-fork-fork-4"}
	t.Cleanup(func() {
		for _, id := range ids {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := d.Client().SandboxHandle(id).Destroy(ctx); err != nil && !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
				t.Errorf("destroy %s: %v", id, err)
			}
			cancel()
		}
	})
	start := time.Now()
	res, err := base.Fork(ctxT(t, 5*time.Minute), 4, nil)
	if err != nil {
		t.Fatalf("Fork: %v\n%s", err, d.LogTail())
	}
	t.Logf("snapshot + fork 4 (8 MiB disk): %v wall; server: snapshot %.0f ms, 4 forks %.0f ms, total %.0f ms",
		time.Since(start).Round(time.Millisecond), res.SnapshotMs, res.ForkMs, res.TotalMs)
	if len(res.Sandboxes) != 4 {
		t.Fatalf("forks = %+v", res.Sandboxes)
	}
	for i, f := range res.Sandboxes {
		if f.ID != ids[i] || f.Status != client.SandboxStatus("running") || f.Snapshot != res.Snapshot.ID || f.InstanceType != "lite" {
			t.Errorf("fork %d = %+v", i, f)
		}
		t.Logf("fork %s started in %.0f ms", f.ID, f.StartMs)
	}
	forks := make([]*client.Sandbox, 4)
	for i, id := range ids {
		forks[i] = d.Client().SandboxHandle(id)
		mustExec(t, forks[i], fmt.Sprintf("echo %d > /workspace/w/own-%d.txt && echo changed-by-%d > /workspace/w/base.txt", i+1, i+1, i+1))
	}
	for i, f := range forks {
		want := fmt.Sprintf("base.txt blob own-%d.txt \nchanged-by-%d\n", i+1, i+1)
		if got := mustExec(t, f, "cd /workspace/w && ls | tr '\\n' ' ' && echo && cat base.txt"); got != want {
			t.Errorf("fork %d sees:\n%s\nwant:\n%s", i+1, got, want)
		}
	}
	if got := mustExec(t, base, "cd /workspace/w && ls | tr '\\n' ' ' && cat base.txt"); got != "base.txt blob base\n" {
		t.Errorf("the source sees: %q", got)
	}
	// Fork targets that exist are refused, and nothing is left half made.
	if _, err := base.Fork(ctxT(t, time.Minute), 1, &client.ForkOptions{IDs: []string{ids[0]}}); !errdefs.IsCode(err, errdefs.CodeSandboxExists) {
		t.Errorf("fork onto an existing sandbox: %v", err)
	}
	if _, err := base.Fork(ctxT(t, time.Minute), 0, nil); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
		t.Errorf("fork 0: %v", err)
	}
}

func TestSnapshotRestore(t *testing.T) {
	requireEnv(t)
	parallel(t)
	sb := sandbox(t, "e2e-snap-restore", &client.SandboxOptions{InstanceType: "lite"})
	mustExec(t, sb, "echo v1 > /workspace/f && rm /etc/motd")
	snap, err := sb.Snapshot(ctxT(t, 5*time.Minute))
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	mustExec(t, sb, "echo v2 > /workspace/f && touch /workspace/extra && echo back > /etc/motd")
	start := time.Now()
	info, err := sb.RestoreSnapshot(ctxT(t, 5*time.Minute), snap.ID)
	if err != nil {
		t.Fatalf("RestoreSnapshot: %v\n%s", err, d.LogTail())
	}
	t.Logf("restore to a snapshot: %v", time.Since(start).Round(time.Millisecond))
	if info.Status != client.SandboxStatus("running") || info.Snapshot != snap.ID {
		t.Errorf("after restore: %+v", info)
	}
	want := "v1\nabsent\nmotd-gone\n"
	if got := mustExec(t, sb, "cat /workspace/f; test -e /workspace/extra && echo present || echo absent; test -e /etc/motd && echo motd-back || echo motd-gone"); got != want {
		t.Errorf("after restore:\n%s\nwant:\n%s", got, want)
	}
	if _, err := sb.RestoreSnapshot(ctxT(t, time.Minute), "sha256-"+strings.Repeat("1", 64)); !errdefs.IsCode(err, errdefs.CodeSnapshotNotFound) {
		t.Errorf("unknown snapshot: %v", err)
	}
}
