package daemon

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/sandboxid"
)

// stopper stops a sandbox whose placeholder violation asks for it (onViolation
// "block_and_stop"); the manager is set once it exists.
type stopper struct {
	mgr   atomic.Pointer[sandbox.Manager]
	log   *slog.Logger
	audit sandbox.Auditor // the stop is recorded in the audit log
}

func (s *stopper) stop(id string) {
	m := s.mgr.Load()
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) //nolint:forbidigo // called from a sandbox's stop, which has no ctx to give
	defer cancel()
	sid, err := sandboxid.Parse(id)
	if err == nil {
		_, err = m.Stop(ctx, sid)
	}
	if err != nil {
		s.log.Warn("stop after placeholder violation failed", "sandbox_id", id, "err", err)
		return
	}
	s.log.Warn("sandbox stopped after a placeholder violation", "sandbox_id", id)
	s.audit.Decision(ctx, sandbox.AuditStopped, id, slog.String("reason", "egress placeholder violation"))
}
