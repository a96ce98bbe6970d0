package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

// projectScript makes /workspace/proj with every kind of entry a backup keeps and nFiles small
// files under node_modules.
const projectScript = `set -e
mkdir -p /workspace/proj/src /workspace/proj/empty && cd /workspace/proj
echo one > src/a.txt
ln -s src/a.txt link
ln src/a.txt hard
chmod 751 src
chmod 600 src/a.txt
echo noise > debug.log
for p in $(seq 1 20); do mkdir -p node_modules/pkg$p/lib; for f in $(seq 1 50); do echo "module.exports=$p$f" > node_modules/pkg$p/lib/f$f.js; done; done
`

// projectCheck prints what a restore must bring back.
const projectCheck = `cd %s && cat src/a.txt && readlink link && stat -c '%%h %%a' src/a.txt && stat -c %%a src &&
test -d empty && find node_modules -type f | wc -l && ls -A | tr '\n' ' '`

const projectWant = "one\nsrc/a.txt\n2 600\n751\n1000\nempty hard link node_modules src "

func checkProject(t *testing.T, sb *client.Sandbox, dir string) {
	t.Helper()
	cmd := strings.ReplaceAll(projectCheck, "%s", dir)
	cmd = strings.ReplaceAll(cmd, "%%", "%")
	if got := mustExec(t, sb, cmd); got != projectWant {
		t.Errorf("%s in %s:\n%s\nwant:\n%s", dir, sb.ID(), got, projectWant)
	}
}

func TestBackupRoundTrip(t *testing.T) {
	requireEnv(t)
	parallel(t)
	a := sandbox(t, "e2e-bak-a", &client.SandboxOptions{InstanceType: "basic"})
	b := sandbox(t, "e2e-bak-b", &client.SandboxOptions{InstanceType: "basic"})
	mustExec(t, a, projectScript)

	start := time.Now()
	bk, err := a.CreateBackup(ctxT(t, 5*time.Minute), client.BackupOptions{Dir: "/workspace/proj", Name: "proj", Excludes: []string{"*.log"}})
	if err != nil {
		t.Fatalf("CreateBackup: %v\n%s", err, d.LogTail())
	}
	t.Logf("backup of 1000+ files: %d bytes in %v", bk.SizeBytes, time.Since(start).Round(time.Millisecond))
	if bk.ID == "" || bk.Dir != "/workspace/proj" || bk.SandboxID != a.ID() || bk.SizeBytes == 0 {
		t.Fatalf("backup = %+v", bk)
	}
	got, err := d.Client().GetBackup(ctxT(t, time.Minute), bk.ID)
	if err != nil || got.ID != bk.ID || got.Name != "proj" {
		t.Fatalf("GetBackup = %+v, %v", got, err)
	}

	// Changes after the backup are gone after a restore into the same directory.
	mustExec(t, a, "cd /workspace/proj && echo changed > src/a.txt && rm -rf node_modules empty link && touch new-file")
	start = time.Now()
	r, err := a.RestoreBackup(ctxT(t, 5*time.Minute), bk.ID, "")
	if err != nil {
		t.Fatalf("RestoreBackup: %v\n%s", err, d.LogTail())
	}
	t.Logf("restore: %v", time.Since(start).Round(time.Millisecond))
	if r.ID != bk.ID || r.Dir != "/workspace/proj" {
		t.Errorf("restore = %+v", r)
	}
	checkProject(t, a, "/workspace/proj")
	// A session whose cwd is the restored directory sees the new content.
	if got := mustExec(t, a, "cd /workspace/proj && cat src/a.txt"); got != "one\n" {
		t.Errorf("after cd: %q", got)
	}

	// Into another directory of the same sandbox, and into another sandbox.
	if _, err := a.RestoreBackup(ctxT(t, 5*time.Minute), bk.ID, "/workspace/copy"); err != nil {
		t.Fatal(err)
	}
	checkProject(t, a, "/workspace/copy")
	if _, err := b.RestoreBackup(ctxT(t, 5*time.Minute), bk.ID, "/app/proj"); err != nil {
		t.Fatal(err)
	}
	checkProject(t, b, "/app/proj")
	// The whole /workspace (a directory of the image: swapped entry by entry).
	mustExec(t, b, "mkdir -p /workspace && echo stale > /workspace/stale")
	if _, err := b.RestoreBackup(ctxT(t, 5*time.Minute), bk.ID, "/workspace"); err != nil {
		t.Fatal(err)
	}
	checkProject(t, b, "/workspace")
	if got := mustExec(t, b, "ls -A / | grep -c hutch-restore || true"); got != "0\n" {
		t.Errorf("work directories left in /: %q", got)
	}

	list, err := d.Client().ListBackups(ctxT(t, time.Minute), a.ID())
	if err != nil || len(list) != 1 || list[0].ID != bk.ID {
		t.Errorf("ListBackups = %+v, %v", list, err)
	}
	if err := d.Client().DeleteBackup(ctxT(t, time.Minute), bk.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RestoreBackup(ctxT(t, time.Minute), bk.ID, ""); !errdefs.IsCode(err, errdefs.CodeBackupNotFound) {
		t.Errorf("restore after delete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.StateDir, "blobs/backups", bk.ID+".tar.zst")); err == nil {
		t.Error("archive blob survived the delete")
	}
}

func TestBackupBadInput(t *testing.T) {
	requireEnv(t)
	parallel(t)
	a := sandbox(t, "e2e-bak-bad", &client.SandboxOptions{InstanceType: "lite"})
	mustExec(t, a, "mkdir -p /workspace/p && echo x > /workspace/p/f")
	for _, c := range []struct {
		opts client.BackupOptions
		code errdefs.Code
	}{
		{client.BackupOptions{Dir: "/etc"}, errdefs.CodeInvalidBackupConfig},
		{client.BackupOptions{Dir: "workspace/p"}, errdefs.CodeInvalidBackupConfig},
		{client.BackupOptions{Dir: "/workspace/../etc"}, errdefs.CodeInvalidBackupConfig},
		{client.BackupOptions{Dir: "/workspace/p", TTL: -time.Second}, errdefs.CodeInvalidBackupConfig},
		{client.BackupOptions{Dir: "/workspace/p", Name: strings.Repeat("x", 257)}, errdefs.CodeInvalidBackupConfig},
		{client.BackupOptions{Dir: "/workspace/missing"}, errdefs.CodeFileNotFound},
	} {
		if _, err := a.CreateBackup(ctxT(t, time.Minute), c.opts); !errdefs.IsCode(err, c.code) {
			t.Errorf("CreateBackup(%+v) = %v; want %s", c.opts, err, c.code)
		}
	}
	// ttl 0 on the wire (the SDK sends 0 as "default").
	req, _ := http.NewRequest(http.MethodPost, d.URL()+"/v1/sandboxes/e2e-bak-bad/backups", bytes.NewReader([]byte(`{"dir":"/workspace/p","ttl":0}`)))
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("ttl 0: status %d", resp.StatusCode)
	}
	if _, err := a.RestoreBackup(ctxT(t, time.Minute), "6f1c0d2e-0000-4000-8000-000000000000", ""); !errdefs.IsCode(err, errdefs.CodeBackupNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	bk, err := a.CreateBackup(ctxT(t, time.Minute), client.BackupOptions{Dir: "/workspace/p", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.RestoreBackup(ctxT(t, time.Minute), bk.ID, "/etc"); !errdefs.IsCode(err, errdefs.CodeInvalidBackupConfig) {
		t.Errorf("restore into /etc: %v", err)
	}
	time.Sleep(2 * time.Second)
	if _, err := a.RestoreBackup(ctxT(t, time.Minute), bk.ID, ""); !errdefs.IsCode(err, errdefs.CodeBackupExpired) {
		t.Errorf("expired: %v", err)
	}
	d.Client().DeleteBackup(ctxT(t, time.Minute), bk.ID)
}

// kill -9 of hutchd during a large backup: after the restart the backup does not exist (no
// row, no meta), the orphan archive and the killed upload's temp file are removed, and a retry
// works.
func TestBackupKill9(t *testing.T) {
	requireEnv(t)
	a := sandbox(t, "e2e-bak-kill", &client.SandboxOptions{InstanceType: "basic"})
	mustExec(t, a, "mkdir -p /workspace/big && head -c 400M /dev/urandom > /workspace/big/random && echo small > /workspace/big/small")
	backups := filepath.Join(d.StateDir, "blobs/backups")
	metasBefore, _ := filepath.Glob(filepath.Join(backups, "*.json"))

	errc := make(chan error, 1)
	go func() {
		_, err := a.CreateBackup(context.Background(), client.BackupOptions{Dir: "/workspace/big"})
		errc <- err
	}()
	// Kill once the upload is under way (its temp file exists and grows).
	if !testutil.Poll(t, 5*time.Millisecond, 2*time.Minute, func() bool {
		temps, _ := filepath.Glob(filepath.Join(backups, ".tmp-blob-*"))
		if len(temps) == 0 {
			return false
		}
		fi, err := os.Stat(temps[0])
		return err == nil && fi.Size() > 1<<20
	}) {
		t.Fatalf("the backup never started uploading\n%s", d.LogTail())
	}
	d.Kill9()
	if err := <-errc; err == nil {
		t.Fatal("the backup succeeded although hutchd was killed")
	}
	time.Sleep(1500 * time.Millisecond) // the temp file is now older than the orphan age below
	orig := append([]string{}, d.Args...)
	d.Args = append(d.Args, "--backup-orphan-age", "1s", "--backup-gc-interval", "1s")
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The tests after this one (the parallel ones run last) get hutchd's usual GC back: a
	// one-second orphan age would sweep their backups' uploads and expired backups under them.
	t.Cleanup(func() {
		d.Stop()
		d.Args = orig
		if err := d.Start(context.Background()); err != nil {
			t.Errorf("restart hutchd with its usual backup GC: %v", err)
		}
	})
	list, err := d.Client().ListBackups(ctxT(t, time.Minute), a.ID())
	if err != nil || len(list) != 0 {
		t.Errorf("backups after the kill: %+v, %v", list, err)
	}
	metasAfter, _ := filepath.Glob(filepath.Join(backups, "*.json"))
	if len(metasAfter) != len(metasBefore) {
		t.Errorf("meta records before %v, after %v", metasBefore, metasAfter)
	}
	// Within a few GC rounds nothing of the killed backup is left.
	var left []string
	testutil.Poll(t, 200*time.Millisecond, 15*time.Second, func() bool {
		left = nil
		entries, _ := os.ReadDir(backups)
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".tmp-blob-") {
				left = append(left, name)
			} else if id, ok := strings.CutSuffix(name, ".tar.zst"); ok {
				if _, err := os.Stat(filepath.Join(backups, id+".json")); err != nil {
					left = append(left, name)
				}
			}
		}
		return len(left) == 0
	})
	if len(left) > 0 {
		t.Errorf("left in the blob store after restart and GC: %v", left)
	}
	start := time.Now()
	bk, err := a.CreateBackup(ctxT(t, 5*time.Minute), client.BackupOptions{Dir: "/workspace/big"})
	if err != nil {
		t.Fatalf("retry: %v\n%s", err, d.LogTail())
	}
	t.Logf("retry: backup of 400 MiB of random data: %d bytes in %v", bk.SizeBytes, time.Since(start).Round(time.Millisecond))
	mustExec(t, a, "rm -rf /workspace/big")
	start = time.Now()
	if _, err := a.RestoreBackup(ctxT(t, 5*time.Minute), bk.ID, ""); err != nil {
		t.Fatal(err)
	}
	t.Logf("restore of 400 MiB: %v", time.Since(start).Round(time.Millisecond))
	if got := mustExec(t, a, "stat -c %s /workspace/big/random; cat /workspace/big/small"); got != "419430400\nsmall\n" {
		t.Errorf("after restore: %q", got)
	}
	d.Client().DeleteBackup(ctxT(t, time.Minute), bk.ID)
}

// A node_modules-sized tree (40,000 small files): logs backup and restore times.
func TestBackupLargeTree(t *testing.T) {
	requireEnv(t)
	parallel(t)
	if testing.Short() {
		t.Skip("large tree: skipped with -short")
	}
	a := sandbox(t, "e2e-bak-large", &client.SandboxOptions{InstanceType: "standard-1"})
	mustExec(t, a, `mkdir -p /workspace/nm && cd /workspace/nm && python3 - 2>/dev/null <<'EOF' || for p in $(seq 0 399); do mkdir -p pkg$p/lib; for f in $(seq 0 99); do printf 'module.exports = function () { return %d }\n' $f > pkg$p/lib/f$f.js; done; done
import os
for p in range(400):
    os.makedirs(f"pkg{p}/lib", exist_ok=True)
    for f in range(100):
        with open(f"pkg{p}/lib/f{f}.js", "w") as fh:
            fh.write("module.exports = function () { return %d }\n" % f * 20)
EOF`)
	count := mustExec(t, a, "find /workspace/nm -type f | wc -l; du -sm /workspace/nm | cut -f1")
	start := time.Now()
	bk, err := a.CreateBackup(ctxT(t, 10*time.Minute), client.BackupOptions{Dir: "/workspace/nm"})
	if err != nil {
		t.Fatal(err)
	}
	backupTime := time.Since(start)
	mustExec(t, a, "rm -rf /workspace/nm")
	start = time.Now()
	if _, err := a.RestoreBackup(ctxT(t, 10*time.Minute), bk.ID, ""); err != nil {
		t.Fatal(err)
	}
	restoreTime := time.Since(start)
	if got := mustExec(t, a, "find /workspace/nm -type f | wc -l; du -sm /workspace/nm | cut -f1"); got != count {
		t.Errorf("after restore: %q, before %q", got, count)
	}
	t.Logf("tree of %s MiB: backup %v (%d bytes compressed), restore into a fresh dir %v",
		strings.ReplaceAll(strings.TrimSpace(count), "\n", " files, "), backupTime.Round(time.Millisecond), bk.SizeBytes,
		restoreTime.Round(time.Millisecond))
	d.Client().DeleteBackup(ctxT(t, time.Minute), bk.ID)
}
