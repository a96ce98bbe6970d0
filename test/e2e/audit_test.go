package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/testutil"
)

// auditLog reads the JSON records of a hutchd's audit.log.
func auditLog(t *testing.T, stateDir string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(stateDir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit.log line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// findAudit returns the first record after skip records with action and id (and by), or nil.
func findAudit(recs []map[string]any, skip int, action, id, by string) map[string]any {
	for _, r := range recs[min(skip, len(recs)):] {
		if r["action"] == action && r["id"] == id && r["by"] == by {
			return r
		}
	}
	return nil
}

// TestAuditLifecycleDecisions: the decisions hutchd takes by itself reach audit.log with
// "by": "hutchd": the start at creation, the idle sleep with its reason ("idle for 2s"), the
// wake a later request causes, a settings change with its new values; requests through the
// API stay recorded with "by": "api".
func TestAuditLifecycleDecisions(t *testing.T) {
	requireEnv(t)
	ctx := ctxT(t, 4*time.Minute)
	skip := len(auditLog(t, d.StateDir))
	sb := sandbox(t, "audit-idle", &client.SandboxOptions{SleepAfter: 2 * time.Second})
	if _, err := sb.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, sb, client.StatusSleeping, 2*time.Minute)
	var recs []map[string]any
	var slept map[string]any
	testutil.Poll(t, 100*time.Millisecond, 10*time.Second, func() bool {
		recs = auditLog(t, d.StateDir)
		slept = findAudit(recs, skip, "sandbox.slept", sb.ID(), "hutchd")
		return slept != nil
	})
	if slept == nil || slept["reason"] != "idle for 2s" {
		t.Fatalf("audit.log has no idle sleep of %s with reason \"idle for 2s\": %v\nrecords: %v", sb.ID(), slept, recs[min(skip, len(recs)):])
	}
	t.Logf("idle sleep record: %v", slept)
	if r := findAudit(recs, skip, "sandbox.started", sb.ID(), "hutchd"); r == nil || r["from"] != "creating" {
		t.Errorf("no start at creation recorded: %v", r)
	}
	if r := findAudit(recs, skip, "sandbox.create", sb.ID(), "api"); r == nil {
		t.Errorf("no API create record")
	}

	// A request wakes it: recorded as a wake.
	if _, err := sb.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	keep := true
	if _, err := sb.Update(ctx, client.SandboxUpdate{KeepAlive: &keep}); err != nil {
		t.Fatal(err)
	}
	recs = auditLog(t, d.StateDir)
	if r := findAudit(recs, skip, "sandbox.woke", sb.ID(), "hutchd"); r == nil {
		t.Errorf("no wake recorded after the sleep; records: %v", recs[skip:])
	}
	if r := findAudit(recs, skip, "sandbox.settings", sb.ID(), "hutchd"); r == nil || r["keepAlive"] != true || r["sleepAfter"] != "2s" {
		t.Errorf("settings change recorded as %v; want keepAlive true, sleepAfter 2s", r)
	}
	if r := findAudit(recs, skip, "sandbox.update", sb.ID(), "api"); r == nil {
		t.Errorf("no API update record")
	}
	for _, r := range recs[skip:] {
		if b, _ := json.Marshal(r); strings.Contains(string(b), d.Token) {
			t.Fatalf("audit record holds the API token: %s", b)
		}
	}
}
