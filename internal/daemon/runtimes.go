package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/config"
	"github.com/hutchdev/hutch/internal/runtime/runsc"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/sandboxid"
)

// pingAgent is the guard's agent probe: the guard names containers, whose IDs hutchd made
// from sandbox IDs; they are checked all the same.
func pingAgent(ctx context.Context, mgr *sandbox.Manager, id string) error {
	sid, err := sandboxid.Parse(id)
	if err != nil {
		return err
	}
	return mgr.PingAgent(ctx, sid)
}

// setupRuntimes adds the gVisor backend to mgr when runsc is installed (else records why it is
// not: sandboxes asking for it get RUNTIME_NOT_AVAILABLE) and sets the default runtime. A
// default runtime that cannot run here is an error: hutchd does not start.
func setupRuntimes(cfg config.Config, mgr *sandbox.Manager, auditor sandbox.Auditor, log *slog.Logger) error {
	rt, err := runsc.New(runsc.Config{
		Binary:       cfg.RunscBinary,
		Root:         filepath.Join(cfg.StateDir, "runsc"),
		BundleDir:    filepath.Join(cfg.StateDir, "bundles-runsc"),
		CgroupParent: cfg.CgroupParent,
		Platform:     cfg.RunscPlatform,
		OnGuardKill:  func(k runsc.GuardKill) { auditGuardKill(auditor, k) },
		AgentProbe:   func(ctx context.Context, id string) error { return pingAgent(ctx, mgr, id) },
	}, log.With("component", "runsc"))
	switch {
	case err == nil:
		mgr.AddRuntime(rt)
		log.Info("gvisor runtime available", "platform", cfg.RunscPlatform)
	case errors.Is(err, errdefs.ErrUnavailable):
		mgr.SetRuntimeUnavailable(sandbox.RuntimeGVisor, err)
		log.Info("gvisor runtime not available", "reason", err)
	default:
		return fmt.Errorf("gvisor runtime: %w", err)
	}
	if err := mgr.SetDefaultRuntime(cfg.Runtime); err != nil {
		return fmt.Errorf("--runtime %s: %w", cfg.Runtime, err)
	}
	return nil
}

// auditGuardKill records a memory guard's kill in the audit log (sandbox.AuditMemoryGuardKill).
func auditGuardKill(a sandbox.Auditor, k runsc.GuardKill) {
	attrs := []slog.Attr{
		slog.String("cause", k.Cause), slog.Int("pgid", k.PGID), slog.Int("groups", k.Groups),
		slog.Int("processes", k.Processes), slog.Int("rounds", k.Rounds),
		slog.Int64("usage", k.Usage), slog.Int64("peak", k.Peak), slog.Int64("trigger", k.Trigger), slog.Int64("hostLimit", k.HostLimit),
		slog.Int64("pauseMs", k.Pause.Milliseconds()), slog.Int64("listMs", k.List.Milliseconds()),
		slog.Int64("resumeMs", k.Resume.Milliseconds()), slog.Int64("killMs", k.Kill.Milliseconds()),
	}
	if k.Err != nil {
		attrs = append(attrs, slog.String("error", k.Err.Error()))
	}
	a.Decision(context.Background(), sandbox.AuditMemoryGuardKill, k.ID, attrs...) //nolint:forbidigo // the guard's kill callback carries no ctx
}
