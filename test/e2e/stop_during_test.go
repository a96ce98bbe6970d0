package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

// TestStopDuringExec: a stop or a sleep while an exec runs ends the exec with UNAVAILABLE (the
// sandbox went down under it; sending the request again starts the sandbox), never with an
// internal error, and the sandbox answers the next exec.
func TestStopDuringExec(t *testing.T) {
	requireEnv(t)
	parallel(t)
	for _, tc := range []struct {
		name string
		down func(*client.Sandbox, context.Context) (*client.SandboxInfo, error)
	}{
		{"stop", (*client.Sandbox).Stop},
		{"sleep", (*client.Sandbox).Sleep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := sandbox(t, "e2e-down-exec-"+tc.name, nil)
			mustExec(t, sb, "true")
			errc := make(chan error, 1)
			go func() {
				// In a session of its own: the default session runs one command at a time, and the
				// probe below uses it.
				res, err := sb.Exec(ctxT(t, 3*time.Minute), "sleep 120; echo finished", &client.ExecOptions{SessionID: "long"})
				if err == nil {
					t.Errorf("exec across a %s: %+v; want an error", tc.name, res)
				}
				errc <- err
			}()
			// The command is running before the sandbox goes down.
			if !testutil.Poll(t, 100*time.Millisecond, time.Minute, func() bool {
				return strings.Contains(processes(t, sb), "sleep 120")
			}) {
				t.Fatal("the exec's command never ran")
			}
			if _, err := tc.down(sb, ctxT(t, 2*time.Minute)); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			err := <-errc
			if !errdefs.IsCode(err, errdefs.CodeUnavailable) {
				t.Errorf("exec across a %s: %v (code %s); want UNAVAILABLE", tc.name, err, errdefs.CodeOf(err))
			}
			if got := mustExec(t, sb, "echo back"); got != "back\n" {
				t.Errorf("after the %s: %q", tc.name, got)
			}
		})
	}
}
