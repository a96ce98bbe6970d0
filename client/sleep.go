package client

import (
	"context"
	"fmt"
	"net/http"
	"time"

	v1 "github.com/hutchdev/hutch/api/v1"
)

// Sleep puts the sandbox to sleep now (POST /v1/sandboxes/{id}/sleep) and returns its record:
// its processes are stopped (SIGTERM, a grace period, SIGKILL), its file data flushed, its
// container and network torn down; its disk, sessions (cwd and exported variables) and exposed
// ports remain. Any later operation on it, or Wake, wakes it. Sleeping a sandbox that is not
// running is a no-op. Requests in flight on the sandbox are cut. Unknown sandbox →
// SANDBOX_NOT_FOUND (ErrNotFound).
func (s *Sandbox) Sleep(ctx context.Context) (*SandboxInfo, error) {
	return s.lifecycle(ctx, "sleep")
}

// Wake starts a sleeping (or stopped) sandbox and returns its record once it runs
// (POST /v1/sandboxes/{id}/wake, the same as Start). Waking a running sandbox is a no-op.
func (s *Sandbox) Wake(ctx context.Context) (*SandboxInfo, error) {
	return s.lifecycle(ctx, "wake")
}

// SandboxUpdate changes a sandbox's settings; nil fields stay as they are.
type SandboxUpdate struct {
	// SleepAfter is the idle time before the sandbox sleeps: at least 1 s, whole milliseconds.
	SleepAfter *time.Duration
	// KeepAlive: the sandbox never sleeps when idle.
	KeepAlive *bool
	// SnapshotOnSleep: every sleep snapshots the sandbox (SandboxInfo.LastSnapshot).
	SnapshotOnSleep *bool
}

// Update changes the sandbox's sleep settings (and snapshotOnSleep) (PATCH /v1/sandboxes/{id}) and returns its
// record. It does not wake a sleeping sandbox; on a running one the idle timer starts again
// from now (so switching KeepAlive off gives it a full SleepAfter). Errors: VALIDATION_FAILED
// (ErrInvalidArgument) for a SleepAfter under 1 s, SANDBOX_NOT_FOUND (ErrNotFound).
func (s *Sandbox) Update(ctx context.Context, u SandboxUpdate) (*SandboxInfo, error) {
	if err := checkID(s.sandboxID); err != nil {
		return nil, fmt.Errorf("update sandbox: %w", err)
	}
	var req v1.UpdateSandboxRequest
	if u.SleepAfter != nil {
		sa := v1.SleepAfter(u.SleepAfter.String()) // "0s" or negative: refused by the server
		req.SleepAfter = &sa
	}
	req.KeepAlive = u.KeepAlive
	req.SnapshotOnSleep = u.SnapshotOnSleep
	var info SandboxInfo
	err := s.c.call(ctx, request{method: http.MethodPatch, path: sandboxPath(s.sandboxID, ""), json: req}, &info)
	if err != nil {
		return nil, fmt.Errorf("update sandbox %q: %w", s.sandboxID, err)
	}
	return &info, nil
}
