package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// TestBackupSparseArchiveSize: a backup of a directory holding a 20 GiB sparse file with a few bytes
// stores those bytes, not 20 GiB of zeros (before: the agent read, and hutchd compressed, the
// whole apparent size), and a restore into another sandbox gives the same size, the same bytes
// at the data offsets, and holes.
func TestBackupSparseArchiveSize(t *testing.T) {
	requireEnv(t)
	parallel(t)
	a := sandbox(t, "e2e-bak-sparse-a", nil)
	b := sandbox(t, "e2e-bak-sparse-b", nil)
	const size = 20 << 30
	mustExec(t, a, fmt.Sprintf(`set -e; mkdir -p /workspace/sp && cd /workspace/sp
truncate -s %d huge
printf HEAD | dd of=huge conv=notrunc status=none
printf MIDDLE | dd of=huge bs=1 seek=%d conv=notrunc status=none
printf TAIL | dd of=huge bs=1 seek=%d conv=notrunc status=none`, size, size/2+12345, size-4))
	bk, err := a.CreateBackup(ctxT(t, 10*time.Minute), client.BackupOptions{Dir: "/workspace/sp"})
	if err != nil {
		t.Fatalf("CreateBackup: %v\n%s", err, d.LogTail())
	}
	t.Logf("backup of a 20 GiB sparse file: %d bytes stored", bk.SizeBytes)
	if bk.SizeBytes > 1<<20 {
		t.Errorf("backup of a 20 GiB file holding 14 bytes stores %d bytes: its holes were archived", bk.SizeBytes)
	}
	if _, err := b.RestoreBackup(ctxT(t, 10*time.Minute), bk.ID, "/workspace/sp"); err != nil {
		t.Fatalf("RestoreBackup: %v\n%s", err, d.LogTail())
	}
	got := mustExec(t, b, fmt.Sprintf(`cd /workspace/sp && stat -c %%s huge &&
dd if=huge bs=1 count=4 status=none && echo &&
dd if=huge bs=1 skip=%d count=6 status=none && echo &&
dd if=huge bs=1 skip=%d count=4 status=none && echo &&
du -k huge | cut -f1`, size/2+12345, size-4))
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 5 || lines[0] != strconv.Itoa(size) || lines[1] != "HEAD" || lines[2] != "MIDDLE" || lines[3] != "TAIL" {
		t.Fatalf("restored file: %q", got)
	}
	if kb, err := strconv.Atoi(lines[4]); err != nil || kb > 10<<10 {
		t.Errorf("restored file allocates %s KiB; want it sparse", lines[4])
	}
}
