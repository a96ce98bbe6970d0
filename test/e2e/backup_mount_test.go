package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
)

// A restore is a mount of the backup's tree (extracted once per host) below a writable layer of
// the sandbox's own: it keeps its content and the sandbox's later changes across sleep and
// wake, is replaced by a new restore, and is part of the sandbox's snapshots.
func TestBackupRestoreMount(t *testing.T) {
	requireEnv(t)
	parallel(t)
	skipOnGVisor(t, "restores are copies there (the gofer does not see host mounts made after the start; docs/ARCHITECTURE.md § gVisor runtime), and this test is about restores as mounts")
	a := sandbox(t, "e2e-bmnt-a", &client.SandboxOptions{InstanceType: "basic"})
	mustExec(t, a, projectScript)
	bk, err := a.CreateBackup(ctxT(t, 5*time.Minute), client.BackupOptions{Dir: "/workspace/proj", Excludes: []string{"*.log"}})
	if err != nil {
		t.Fatalf("CreateBackup: %v\n%s", err, d.LogTail())
	}
	b := sandbox(t, "e2e-bmnt-b", &client.SandboxOptions{InstanceType: "basic"})
	mustExec(t, b, "mkdir -p /workspace/app && echo old > /workspace/app/old.txt")
	r, err := b.RestoreBackupWith(ctxT(t, 5*time.Minute), bk.ID, client.RestoreOptions{Dir: "/workspace/app"})
	if err != nil {
		t.Fatalf("restore: %v\n%s", err, d.LogTail())
	}
	if r.Mode != "mount" || r.Dir != "/workspace/app" {
		t.Fatalf("restore = %+v, want mode mount", r)
	}
	t.Logf("first restore (tree extracted): %.1f ms", r.DurationMs)
	checkProject(t, b, "/workspace/app")
	if got := mustExec(t, b, "ls /workspace/app/old.txt 2>&1 || true"); !strings.Contains(got, "No such file") {
		t.Errorf("the directory's old content shows through: %q", got)
	}
	// Changes land in the sandbox's own layer, never in the shared tree.
	mustExec(t, b, "cd /workspace/app && echo mine > src/a.txt && echo new > added.txt && rm -rf node_modules/pkg1")
	c := sandbox(t, "e2e-bmnt-c", &client.SandboxOptions{InstanceType: "basic"})
	r2, err := c.RestoreBackupWith(ctxT(t, 5*time.Minute), bk.ID, client.RestoreOptions{Dir: "/workspace/app"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second restore (tree cached): %.1f ms", r2.DurationMs)
	checkProject(t, c, "/workspace/app")

	// Sleep and wake: the mount comes back with the changes.
	if _, err := b.Sleep(ctxT(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Wake(ctxT(t, 2*time.Minute)); err != nil {
		t.Fatalf("wake: %v\n%s", err, d.LogTail())
	}
	want := "mine\nnew\ngone\n1\n"
	check := "cd /workspace/app && cat src/a.txt added.txt && (test -e node_modules/pkg1 || echo gone) && cat node_modules/pkg2/lib/f1.js | wc -l"
	if got := mustExec(t, b, check); got != want {
		t.Errorf("after sleep and wake: %q, want %q", got, want)
	}

	// A snapshot holds the restored directory with the changes; a sandbox made from it has them
	// as its own files.
	snap, err := b.Snapshot(ctxT(t, 5*time.Minute))
	if err != nil {
		t.Fatalf("snapshot: %v\n%s", err, d.LogTail())
	}
	s := sandbox(t, "e2e-bmnt-s", &client.SandboxOptions{Snapshot: snap.ID})
	if got := mustExec(t, s, check); got != want {
		t.Errorf("sandbox from the snapshot: %q, want %q", got, want)
	}
	if got := mustExec(t, s, "ls /workspace/app/old.txt 2>&1 || true"); !strings.Contains(got, "No such file") {
		t.Errorf("snapshot shows the content hidden by the restore: %q", got)
	}

	// A new restore at the same path replaces the old one and its changes.
	if _, err := b.RestoreBackup(ctxT(t, 5*time.Minute), bk.ID, "/workspace/app"); err != nil {
		t.Fatal(err)
	}
	checkProject(t, b, "/workspace/app")
	if got := mustExec(t, b, "test -e /workspace/app/added.txt && echo stale || echo ok"); got != "ok\n" {
		t.Errorf("changes of the replaced restore show: %q", got)
	}
	// A nested restore, then one at its parent: the parent's hides and drops the nested one.
	if _, err := b.RestoreBackup(ctxT(t, 5*time.Minute), bk.ID, "/workspace/app/src/inner"); err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, b, "cat /workspace/app/src/inner/src/a.txt"); got != "one\n" {
		t.Errorf("nested restore: %q", got)
	}
	if _, err := b.RestoreBackup(ctxT(t, 5*time.Minute), bk.ID, "/workspace"); err != nil {
		t.Fatal(err)
	}
	checkProject(t, b, "/workspace")
	if _, err := b.Sleep(ctxT(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	checkProject(t, b, "/workspace")
	if got := mustExec(t, b, "test -e /workspace/app && echo stale || echo ok"); got != "ok\n" {
		t.Errorf("a dropped nested restore came back after wake: %q", got)
	}

	// Copy mode still extracts into the disk.
	rc, err := c.RestoreBackupWith(ctxT(t, 5*time.Minute), bk.ID, client.RestoreOptions{Dir: "/workspace/copied", Mode: "copy"})
	if err != nil || rc.Mode != "copy" {
		t.Fatalf("copy restore = %+v, %v", rc, err)
	}
	checkProject(t, c, "/workspace/copied")
	if _, err := c.RestoreBackupWith(ctxT(t, time.Minute), bk.ID, client.RestoreOptions{Mode: "lazy"}); !errdefs.IsCode(err, errdefs.CodeInvalidBackupConfig) {
		t.Errorf("unknown mode: %v", err)
	}
}

// The target directory is resolved inside the sandbox: symlinks the sandbox planted cannot
// point the mount at the host, or at a directory outside the allowed roots.
func TestBackupRestoreMountAbuse(t *testing.T) {
	requireEnv(t)
	parallel(t)
	skipOnGVisor(t, "restores are copies there (the gofer does not see host mounts made after the start; docs/ARCHITECTURE.md § gVisor runtime), and this test is about restores as mounts")
	a := sandbox(t, "e2e-bmnt-abuse", &client.SandboxOptions{InstanceType: "lite"})
	mustExec(t, a, "mkdir -p /workspace/p && echo x > /workspace/p/f")
	bk, err := a.CreateBackup(ctxT(t, 5*time.Minute), client.BackupOptions{Dir: "/workspace/p"})
	if err != nil {
		t.Fatal(err)
	}
	hostProbe := "/hutch-e2e-mount-probe"
	os.RemoveAll(hostProbe)
	t.Cleanup(func() { os.RemoveAll(hostProbe) })
	mustExec(t, a, "ln -s /etc /workspace/etc-link && ln -s / /workspace/root-link && ln -s /nowhere/at/all /workspace/dangling && "+
		"ln -s ../../../../../../../.. /workspace/climb && echo file > /workspace/file")
	for _, c := range []struct {
		dir  string
		code errdefs.Code
	}{
		{"/workspace/etc-link", errdefs.CodeInvalidBackupConfig},          // → /etc
		{"/workspace/etc-link/sub", errdefs.CodeInvalidBackupConfig},      // → /etc/sub
		{"/workspace/dangling/x", errdefs.CodeInvalidBackupConfig},        // leads nowhere
		{"/workspace/file/x", errdefs.CodeInvalidBackupConfig},            // through a file
		{"/workspace/climb" + hostProbe, errdefs.CodeInvalidBackupConfig}, // → /hutch-e2e-… inside
		{"/etc", errdefs.CodeInvalidBackupConfig},
	} {
		if _, err := a.RestoreBackup(ctxT(t, time.Minute), bk.ID, c.dir); !errdefs.IsCode(err, c.code) {
			t.Errorf("restore into %s: %v, want %s", c.dir, err, c.code)
		}
	}
	// Through a symlink to the sandbox's own root: lands in the sandbox, never on the host.
	r, err := a.RestoreBackup(ctxT(t, time.Minute), bk.ID, "/workspace/root-link/workspace/via-root"+hostProbe)
	if err != nil {
		t.Fatal(err)
	}
	if r.Dir != "/workspace/via-root"+hostProbe {
		t.Errorf("resolved dir = %q", r.Dir)
	}
	if got := mustExec(t, a, "cat /workspace/via-root"+hostProbe+"/f"); got != "x\n" {
		t.Errorf("restored through the root link: %q", got)
	}
	for _, p := range []string{hostProbe, "/workspace/via-root"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("host path %s was created", p)
		}
	}
	// The sandbox cannot unmount or move the restored directory, and cannot mount anything.
	if got := mustExec(t, a, "umount /workspace/via-root"+hostProbe+" 2>&1; mount -t tmpfs x /workspace/p 2>&1; echo done"); !strings.Contains(got, "done") {
		t.Errorf("umount/mount attempts: %q", got)
	}
	if got := mustExec(t, a, "cat /workspace/via-root"+hostProbe+"/f"); got != "x\n" {
		t.Errorf("the restore did not survive umount attempts: %q", got)
	}
	if ents, _ := filepath.Glob("/workspace/*"); len(ents) > 0 {
		t.Logf("note: host has /workspace entries (not ours): %v", ents)
	}
}

// Backups read the sandbox's directory from the host. A sandbox that swaps a directory for a
// symlink to its root while backups run must not get host files into its archives.
func TestBackupHostReadRace(t *testing.T) {
	requireEnv(t)
	parallel(t)
	a := sandbox(t, "e2e-bak-race", &client.SandboxOptions{InstanceType: "basic"})
	marker := "hutch-e2e-race-marker"
	if err := os.WriteFile("/"+marker, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove("/" + marker) })
	mustExec(t, a, "mkdir -p /workspace/race/d/sub && for i in $(seq 1 200); do echo $i > /workspace/race/d/sub/f$i; done")
	if _, err := a.StartProcess(ctxT(t, time.Minute), "cd /workspace/race && while :; do mv d d2; ln -s / d; ln -sfn / e; rm d; mv d2 d; done", client.ProcessOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		bk, err := a.CreateBackup(ctxT(t, 2*time.Minute), client.BackupOptions{Dir: "/workspace/race"})
		if err != nil {
			// A directory that vanishes part way may fail a backup; it must never leak.
			t.Logf("backup %d: %v", i, err)
			continue
		}
		dir := "/workspace/check" + string(rune('a'+i))
		if _, err := a.RestoreBackup(ctxT(t, 2*time.Minute), bk.ID, dir); err != nil {
			t.Fatal(err)
		}
		if got := mustExec(t, a, "find "+dir+" -name '"+marker+"' -o -name shadow -o -name hostname | head -3"); got != "" {
			t.Fatalf("backup %d holds host files: %q", i, got)
		}
	}
}

// The breaker's findings on restores as mounts (2026-11-30): a sandbox that moves a restored
// directory and plants symlinks must not make hutchd unmount its root, mount a backup outside
// the allowed roots at the next start, or create directories outside them on a refused restore.
func TestBackupRestoreMountMoved(t *testing.T) {
	requireEnv(t)
	parallel(t)
	skipOnGVisor(t, "restores are copies there (the gofer does not see host mounts made after the start; docs/ARCHITECTURE.md § gVisor runtime), and this test is about restores as mounts")
	a := sandbox(t, "e2e-bmnt-moved", &client.SandboxOptions{InstanceType: "lite"})
	mustExec(t, a, "mkdir -p /workspace/p && echo x > /workspace/p/f")
	bk, err := a.CreateBackup(ctxT(t, 5*time.Minute), client.BackupOptions{Dir: "/workspace/p"})
	if err != nil {
		t.Fatal(err)
	}
	// F5: a refused restore creates nothing outside the roots.
	mustExec(t, a, "ln -s /etc /workspace/le")
	if _, err := a.RestoreBackup(ctxT(t, time.Minute), bk.ID, "/workspace/le/made-by-restore/deep"); !errdefs.IsCode(err, errdefs.CodeInvalidBackupConfig) {
		t.Errorf("restore through a symlink to /etc: %v", err)
	}
	if got := mustExec(t, a, "test -e /etc/made-by-restore && echo created || echo clean"); got != "clean\n" {
		t.Errorf("a refused restore created a directory in /etc: %q", got)
	}
	// A symlink loop is a clear error.
	mustExec(t, a, "ln -s /workspace/loop /workspace/loop")
	if _, err := a.RestoreBackup(ctxT(t, time.Minute), bk.ID, "/workspace/loop/x"); !errdefs.IsCode(err, errdefs.CodeInvalidBackupConfig) {
		t.Errorf("restore through a symlink loop: %v", err)
	}

	// F2: the restored directory's parent is moved and its old path made a symlink to /; a new
	// restore above it must not detach the sandbox's root.
	if _, err := a.RestoreBackup(ctxT(t, time.Minute), bk.ID, "/workspace/z/y"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, a, "mv /workspace/z /workspace/zz && mkdir /workspace/z && ln -s / /workspace/z/y")
	if _, err := a.RestoreBackup(ctxT(t, time.Minute), bk.ID, "/workspace/z"); err != nil {
		t.Fatalf("restore above a moved restore: %v\n%s", err, d.LogTail())
	}
	if got := mustExec(t, a, "cat /workspace/z/f && ls / | grep -c workspace"); got != "x\n1\n" {
		t.Errorf("after the restore: %q", got)
	}
	root := filepath.Join(d.StateDir, "data", "sandboxes", a.ID(), "rootfs")
	if m := mountsUnder(filepath.Dir(root)); len(m) == 0 {
		t.Error("the sandbox's root is no longer mounted on the host")
	} else if fstype, _ := mountAt(t, root); fstype != "overlay" {
		t.Errorf("the sandbox's root mount is %q, want overlay", fstype)
	}
	bk2, err := a.CreateBackup(ctxT(t, time.Minute), client.BackupOptions{Dir: "/workspace"})
	if err != nil {
		t.Errorf("backup of /workspace after the restore: %v", err)
	} else {
		_ = d.Client().DeleteBackup(ctxT(t, time.Minute), bk2.ID)
	}

	// F3: a restore whose path later leads elsewhere (a symlink on the way) is not mounted there
	// at the next start; the sandbox keeps working.
	if _, err := a.RestoreBackup(ctxT(t, time.Minute), bk.ID, "/workspace/a/b"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, a, "mv /workspace/a /workspace/c && ln -s /etc /workspace/a")
	if _, err := a.Sleep(ctxT(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, a, "test -e /etc/b/f && echo mounted-in-etc || echo ok"); got != "ok\n" {
		t.Errorf("after wake: %q", got)
	}
	if got := mustExec(t, a, "cat /workspace/z/f"); got != "x\n" {
		t.Errorf("the other restore after wake: %q", got)
	}
}

// A sparse file is extracted sparse: restoring it does not write its zeros to the data volume.
func TestBackupSparseFile(t *testing.T) {
	requireEnv(t)
	parallel(t)
	a := sandbox(t, "e2e-bak-sparse", &client.SandboxOptions{InstanceType: "lite"})
	mustExec(t, a, "mkdir -p /workspace/sp && truncate -s 1G /workspace/sp/big && echo end >> /workspace/sp/big")
	bk, err := a.CreateBackup(ctxT(t, 5*time.Minute), client.BackupOptions{Dir: "/workspace/sp"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.RestoreBackup(ctxT(t, 5*time.Minute), bk.ID, "/workspace/sp2"); err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, a, "stat -c %s /workspace/sp2/big && tail -c 4 /workspace/sp2/big"); got != "1073741828\nend\n" {
		t.Errorf("restored sparse file: %q", got)
	}
	tree := filepath.Join(d.StateDir, "data", "backup-trees", bk.ID, "big")
	var st unix.Stat_t
	if err := unix.Stat(tree, &st); err != nil {
		t.Fatal(err)
	}
	if used := st.Blocks * 512; used > 16<<20 {
		t.Errorf("the extracted sparse file takes %d MiB on the volume, want its data only", used>>20)
	}
}
