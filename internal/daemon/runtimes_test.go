package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/auditlog"
	"github.com/hutchdev/hutch/internal/runtime/runsc"
	"github.com/hutchdev/hutch/internal/sandbox"
)

// TestAuditGuardKill: a memory guard's kill reaches the audit log as a decision of hutchd's,
// with its figures, and a refused kill with its error.
func TestAuditGuardKill(t *testing.T) {
	for _, c := range []struct {
		name    string
		kill    runsc.GuardKill
		wantErr string
	}{
		{"killed", runsc.GuardKill{ID: "sb", Cause: "memory", PGID: 32, Groups: 1, Processes: 183, Rounds: 4, Usage: 539615232, Peak: 640000000, Trigger: 536870912, HostLimit: 805306368,
			Pause: 1200 * time.Millisecond, List: 90 * time.Millisecond, Resume: 40 * time.Millisecond, Kill: 700 * time.Millisecond}, ""},
		{"refused", runsc.GuardKill{ID: "sb", PGID: 7, Processes: 3, Rounds: 0, Usage: 6, Trigger: 5, HostLimit: 9, Err: errors.New("runsc kill sb: boom")}, "runsc kill sb: boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			auditGuardKill(auditlog.NewDecisionLog(slog.New(slog.NewJSONHandler(&buf, nil))), c.kill)
			var rec map[string]any
			if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
				t.Fatalf("%q: %v", buf.String(), err)
			}
			want := map[string]any{
				"action": sandbox.AuditMemoryGuardKill, "by": "hutchd", "id": c.kill.ID,
				"cause": c.kill.Cause, "groups": float64(c.kill.Groups), "pgid": float64(c.kill.PGID), "processes": float64(c.kill.Processes), "rounds": float64(c.kill.Rounds),
				"usage": float64(c.kill.Usage), "peak": float64(c.kill.Peak), "trigger": float64(c.kill.Trigger), "hostLimit": float64(c.kill.HostLimit),
				"pauseMs": float64(c.kill.Pause.Milliseconds()), "listMs": float64(c.kill.List.Milliseconds()),
				"resumeMs": float64(c.kill.Resume.Milliseconds()), "killMs": float64(c.kill.Kill.Milliseconds()),
			}
			for k, v := range want {
				if rec[k] != v {
					t.Errorf("%s = %v, want %v (record %v)", k, rec[k], v, rec)
				}
			}
			if got, _ := rec["error"].(string); got != c.wantErr {
				t.Errorf("error = %q, want %q", got, c.wantErr)
			}
		})
	}
}
