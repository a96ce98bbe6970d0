package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// Ranges hutchd hands out (internal/store/idmap.go): 65536 IDs each, from 2^20 up.
const (
	usernsFirstBase = 1 << 20
	usernsRangeSize = 1 << 16
)

// withUserNS restarts the test hutchd with --userns on for the rest of the test and back to
// the suite's flags afterwards (running sandboxes are left running and re-adopted both ways).
// With HUTCH_USERNS=on in the environment (the whole suite under user namespaces) it only
// checks that the flag is already in force.
func withUserNS(t *testing.T) {
	t.Helper()
	if os.Getenv("HUTCH_USERNS") == "on" {
		return
	}
	orig := append([]string{}, d.Args...)
	d.Stop()
	d.Args = append(append([]string{}, orig...), "--userns", "on")
	if err := d.Start(context.Background()); err != nil {
		t.Fatalf("restart hutchd with --userns on: %v\n%s", err, d.LogTail())
	}
	t.Cleanup(func() {
		d.Stop()
		d.Args = orig
		if err := d.Start(context.Background()); err != nil {
			t.Errorf("restart hutchd without --userns: %v", err)
		}
	})
}

// hostUIDs returns the host UIDs of sandbox id's processes, found by their cgroup.
func hostUIDs(t *testing.T, id string) []int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	var uids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cg, err := os.ReadFile("/proc/" + e.Name() + "/cgroup")
		if err != nil || !strings.Contains(string(cg), "/"+cgroupDir+"/"+id+"\n") {
			continue
		}
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(st), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "Uid:" {
				u, _ := strconv.Atoi(f[2]) // effective
				uids = append(uids, u)
			}
		}
	}
	if len(uids) == 0 {
		t.Fatalf("no host process of sandbox %s found", id)
	}
	return uids
}

// upperOwner returns the host owner of path (inside the sandbox) in sandbox id's own disk.
func upperOwner(t *testing.T, id, path string) (uid, gid int, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(d.StateDir, "data", "sandboxes", id, "disk", "upper", path)
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatalf("host view of %s in %s: %v", path, id, err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid), fi.Mode()
}

// usernsBase checks that every process of sandbox id runs as one host UID of a hutch range and
// returns it (the range's root).
func usernsBase(t *testing.T, id string) int {
	t.Helper()
	uids := hostUIDs(t, id)
	base := uids[0]
	for _, u := range uids {
		if u != base {
			t.Fatalf("sandbox %s: processes run as host UIDs %v; want all as its root", id, uids)
		}
	}
	if base < usernsFirstBase || (base-usernsFirstBase)%usernsRangeSize != 0 {
		t.Fatalf("sandbox %s: root is host UID %d; want a range base (2^20 + k*2^16)", id, base)
	}
	return base
}

// TestUserNS runs sandboxes with --userns on: root inside is an unprivileged host range of the
// sandbox's own, the image is shared, exec, files and processes work, and snapshots, forks,
// restores and backups keep in-sandbox owners while writing the target's range.
func TestUserNS(t *testing.T) {
	requireEnv(t)
	withUserNS(t)
	a := sandbox(t, "userns-a", nil)
	b := sandbox(t, "userns-b", nil)

	if got := mustExec(t, a, "id -u; id -g"); got != "0\n0\n" {
		t.Fatalf("id inside = %q; want root", got)
	}
	mustExec(t, b, "true")
	baseA, baseB := usernsBase(t, "userns-a"), usernsBase(t, "userns-b")
	if baseA == baseB {
		t.Fatalf("two sandboxes share the range at %d", baseA)
	}
	t.Logf("ranges: userns-a at %d, userns-b at %d", baseA, baseB)

	t.Run("files", func(t *testing.T) {
		ctx := ctxT(t, time.Minute)
		// The files API writes as root inside: the host sees the range's root.
		if err := a.WriteFile(ctx, "/workspace/api.txt", []byte("via api")); err != nil {
			t.Fatal(err)
		}
		if uid, gid, _ := upperOwner(t, "userns-a", "workspace/api.txt"); uid != baseA || gid != baseA {
			t.Errorf("file written by the API: host owner %d:%d; want %d:%d", uid, gid, baseA, baseA)
		}
		mustExec(t, a, "echo x > /workspace/by-exec; useradd -u 1000 -m dev 2>/dev/null; su dev -s /bin/sh -c 'echo y > /tmp/by-dev'")
		if uid, _, _ := upperOwner(t, "userns-a", "workspace/by-exec"); uid != baseA {
			t.Errorf("file made by root: host uid %d; want %d", uid, baseA)
		}
		if uid, _, _ := upperOwner(t, "userns-a", "tmp/by-dev"); uid != baseA+1000 {
			t.Errorf("file made by uid 1000: host uid %d; want %d", uid, baseA+1000)
		}
		mustExec(t, b, "echo z > /workspace/in-b")
		if uid, _, _ := upperOwner(t, "userns-b", "workspace/in-b"); uid != baseB {
			t.Errorf("file of the second sandbox: host uid %d; want %d", uid, baseB)
		}
		fc, err := a.ReadFile(ctx, "/workspace/by-exec")
		if err != nil || string(fc.Content) != "x\n" {
			t.Fatalf("ReadFile = %v, %v", fc, err)
		}
		// The image is shared, not copied: its files show the sandbox's root inside and are
		// not in the sandbox's disk.
		if got := mustExec(t, a, "stat -c %u:%g /usr/bin/python3 /etc/passwd"); got != "0:0\n0:0\n" {
			t.Errorf("image files inside: %q; want 0:0", got)
		}
		if _, err := os.Lstat(filepath.Join(d.StateDir, "data", "sandboxes", "userns-a", "disk", "upper", "usr", "bin", "python3")); err == nil {
			t.Error("the image's python3 was copied into the sandbox's disk")
		}
		// Sleep and wake: the root is mounted again with the same range.
		if _, err := a.Sleep(ctx); err != nil {
			t.Fatal(err)
		}
		if got := mustExec(t, a, "cat /workspace/by-exec; stat -c %u /tmp/by-dev"); got != "x\n1000\n" {
			t.Errorf("after sleep and wake: %q", got)
		}
		if usernsBase(t, "userns-a") != baseA {
			t.Error("the sandbox's range changed across sleep and wake")
		}
	})

	t.Run("processes", func(t *testing.T) {
		ctx := ctxT(t, time.Minute)
		p, err := a.StartProcess(ctx, "echo started; sleep 300", client.ProcessOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.WaitForLogText(ctx, "started", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		for _, u := range hostUIDs(t, "userns-a") {
			if u != baseA {
				t.Errorf("a background process runs as host UID %d; want %d", u, baseA)
			}
		}
		if _, err := p.Kill(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("abuse", func(t *testing.T) {
		// A setuid-root file made inside is setuid to the range's root on the host.
		mustExec(t, a, "cp /bin/sh /workspace/suid && chown 0:0 /workspace/suid && chmod 4755 /workspace/suid")
		uid, _, mode := upperOwner(t, "userns-a", "workspace/suid")
		if uid != baseA || mode&os.ModeSetuid == 0 {
			t.Errorf("setuid file: host uid %d mode %v; want uid %d with setuid", uid, mode, baseA)
		}
		// Host-root-owned files bound into the sandbox are not root's inside: root inside
		// cannot chmod, chown or write them, even where the mount itself is writable.
		for _, c := range []struct{ name, cmd string }{
			{"chmod a host device", "chmod 600 /dev/null"},
			{"chown a host device", "chown 0:0 /dev/null"},
			{"write the agent binary", "echo x >> /.hutch/hutch-init"},
			{"write the hosts file", "echo x >> /etc/hosts"},
			{"write the host's sysfs", "echo 1 > /sys/kernel/mm/ksm/run"},
			{"new user namespace", "unshare -U -r true"},
			{"mount", "mount -t tmpfs none /mnt"},
		} {
			res, err := a.Exec(ctxT(t, time.Minute), c.cmd, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode == 0 {
				t.Errorf("%s (%q) succeeded inside the sandbox", c.name, c.cmd)
			}
		}
		if got := mustExec(t, a, "stat -c %u /dev/null /.hutch/hutch-init"); got != "65534\n65534\n" {
			t.Errorf("host-root files inside are owned by %q; want the overflow ID 65534", got)
		}
		// The host's /dev/null is untouched.
		if fi, err := os.Stat("/dev/null"); err != nil || fi.Mode().Perm() != 0o666 {
			t.Errorf("host /dev/null: %v %v", fi.Mode(), err)
		}
	})

	t.Run("snapshot-fork-restore", func(t *testing.T) {
		ctx := ctxT(t, 3*time.Minute)
		mustExec(t, a, "mkdir -p /workspace/own && echo data > /workspace/own/f && chown 1000:1001 /workspace/own/f && chmod 2750 /workspace/own/f")
		fr, err := a.Fork(ctx, 1, &client.ForkOptions{IDs: []string{"userns-fork"}})
		if err != nil {
			t.Fatalf("Fork = %v\n%s", err, d.LogTail())
		}
		fork := d.Client().SandboxHandle("userns-fork")
		t.Cleanup(func() { _ = fork.Destroy(context.Background()) })
		if got := mustExec(t, fork, "id -u; stat -c '%u:%g %a' /workspace/own/f; cat /workspace/own/f"); got != "0\n1000:1001 2750\ndata\n" {
			t.Errorf("fork sees %q; want root, 1000:1001 2750 and the data", got)
		}
		baseF := usernsBase(t, "userns-fork")
		if baseF == baseA || baseF == baseB {
			t.Fatalf("fork got range %d, already used by its parent or a neighbour", baseF)
		}
		// A copy-up in the fork is owned by the fork's range, at the same in-sandbox owner.
		mustExec(t, fork, "echo more >> /workspace/own/f; echo new > /workspace/own/g")
		if uid, gid, _ := upperOwner(t, "userns-fork", "workspace/own/f"); uid != baseF+1000 || gid != baseF+1001 {
			t.Errorf("copied-up file in the fork: host %d:%d; want %d:%d", uid, gid, baseF+1000, baseF+1001)
		}
		if uid, _, _ := upperOwner(t, "userns-fork", "workspace/own/g"); uid != baseF {
			t.Errorf("new file in the fork: host uid %d; want %d", uid, baseF)
		}
		// Restore the snapshot onto the second sandbox: its own range, the same owners inside.
		if _, err := b.RestoreSnapshot(ctx, fr.Snapshot.ID); err != nil {
			t.Fatalf("RestoreSnapshot = %v\n%s", err, d.LogTail())
		}
		if got := mustExec(t, b, "stat -c '%u:%g %a' /workspace/own/f"); got != "1000:1001 2750\n" {
			t.Errorf("restored sandbox sees %q; want 1000:1001 2750", got)
		}
		if usernsBase(t, "userns-b") != baseB {
			t.Error("restoring a snapshot changed the sandbox's range")
		}
		mustExec(t, b, "touch /workspace/own/f")
		if uid, _, _ := upperOwner(t, "userns-b", "workspace/own/f"); uid != baseB+1000 {
			t.Errorf("restored file after a write: host uid %d; want %d", uid, baseB+1000)
		}
	})

	t.Run("backup", func(t *testing.T) {
		ctx := ctxT(t, 3*time.Minute)
		mustExec(t, a, "mkdir -p /workspace/bk/sub && echo v > /workspace/bk/sub/f && chown -R 1000:1000 /workspace/bk/sub && chown 0:50 /workspace/bk")
		bk, err := a.CreateBackup(ctx, client.BackupOptions{Dir: "/workspace/bk"})
		if err != nil {
			t.Fatalf("CreateBackup = %v\n%s", err, d.LogTail())
		}
		want := "0:50\n1000:1000\n1000:1000\n"
		check := func(dir string) string {
			return "stat -c %u:%g " + dir + " " + dir + "/sub " + dir + "/sub/f"
		}
		for _, mode := range []string{"mount", "copy"} {
			dir := "/workspace/bk-" + mode
			if _, err := b.RestoreBackupWith(ctx, bk.ID, client.RestoreOptions{Mode: mode, Dir: dir}); err != nil {
				t.Fatalf("restore (%s) = %v\n%s", mode, err, d.LogTail())
			}
			if got := mustExec(t, b, check(dir)); got != want {
				t.Errorf("after a %s restore in another sandbox: owners %q; want %q", mode, got, want)
			}
			// Writes by uid 1000 inside work and land in the restoring sandbox's range.
			mustExec(t, b, "su dev -s /bin/sh -c 'echo w >> "+dir+"/sub/f' 2>/dev/null || { useradd -u 1000 dev && su dev -s /bin/sh -c 'echo w >> "+dir+"/sub/f'; }")
		}
		// Round trip in the same sandbox, after a change.
		mustExec(t, a, "rm -rf /workspace/bk/sub")
		if _, err := a.RestoreBackupWith(ctx, bk.ID, client.RestoreOptions{Mode: "copy"}); err != nil {
			t.Fatal(err)
		}
		if got := mustExec(t, a, check("/workspace/bk")); got != want {
			t.Errorf("after restoring into the source: owners %q; want %q", got, want)
		}
		if uid, _, _ := upperOwner(t, "userns-a", "workspace/bk/sub/f"); uid != baseA+1000 {
			t.Errorf("restored copy on the host: uid %d; want %d", uid, baseA+1000)
		}
	})
}
