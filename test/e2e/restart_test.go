package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestRestartKeepsDiskAfterEgress: a sandbox that made an egress decision (a DNS lookup: its
// audit log is written in the state dir) keeps its disk across a clean restart of hutchd. The
// log once made the restarted hutchd leave its data volume and give every sandbox an empty disk.
func TestRestartKeepsDiskAfterEgress(t *testing.T) {
	requireEnv(t)
	ctx := ctxT(t, 5*time.Minute)
	sb := sandbox(t, "e2e-restart-disk", nil)
	mustExec(t, sb, "echo precious > /workspace/keep.txt; getent hosts example.com >/dev/null || true")
	if _, err := sb.Sleep(ctx); err != nil {
		t.Fatal(err)
	}
	d.Stop()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(d.LogTail(), "sandboxes from before the data volume") {
		t.Errorf("the restarted hutchd left its data volume:\n%s", d.LogTail())
	}
	if out := mustExec(t, sb, "cat /workspace/keep.txt"); out != "precious\n" {
		t.Fatalf("after the restart: %q; want the file written before it", out)
	}
}
