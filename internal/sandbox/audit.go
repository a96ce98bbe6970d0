package sandbox

import (
	"context"
	"log/slog"

	"github.com/hutchdev/hutch/internal/store"
)

// Auditing. The API records each request that asks for a lifecycle change (internal/server's
// audit log); the Manager records the changes themselves, most of them decided by hutchd alone:
// idle sleeps with their reason, starts and wakes on demand, failed starts and sleeps, a lost
// container, settings changes and what recovery did with each sandbox at restart. Each
// decision is one call of the Auditor (Deps.Auditor); without one nothing is recorded.

// Auditor records lifecycle decisions. Decision is called with the sandbox's ID lock held (or
// during Recover), so it must not block for long nor call back into the Manager. attrs never
// hold secrets (no environment values, no tokens).
type Auditor interface {
	// Decision records action (one of the Audit* constants) on sandbox id, with attributes
	// such as "reason", "from" or "error".
	Decision(ctx context.Context, action, id string, attrs ...slog.Attr)
}

// Actions the Manager records.
const (
	// AuditSlept: the sandbox went to sleep; "reason" is "requested" (POST …/sleep) or
	// "idle for <sleepAfter>" (the idle reaper).
	AuditSlept = "sandbox.slept"
	// AuditSleepFailed: the teardown of a sleep failed ("reason", "error"); the sandbox is
	// recorded as error and the next request starts it again.
	AuditSleepFailed = "sandbox.sleep_failed"
	// AuditStarted: the sandbox was started ("from": its status before: creating, stopped,
	// error, starting).
	AuditStarted = "sandbox.started"
	// AuditWoke: a sleeping sandbox was started again by a request on it.
	AuditWoke = "sandbox.woke"
	// AuditStartFailed: a start or wake failed ("from", "error"); the sandbox is in error.
	AuditStartFailed = "sandbox.start_failed"
	// AuditStopped: hutchd stopped the sandbox by itself ("reason"): its container was gone
	// (Recheck), or an egress placeholder violation (recorded by the daemon).
	AuditStopped = "sandbox.stopped"
	// AuditSettings: sleepAfter, keepAlive or snapshotOnSleep changed (the new values).
	AuditSettings = "sandbox.settings"
	// AuditSleepSnapshot: the snapshot taken as a snapshotOnSleep sandbox fell asleep
	// ("snapshot", or "error").
	AuditSleepSnapshot = "snapshot.at_sleep"
	// AuditRecovered: what hutchd did with the sandbox at restart ("outcome": adopted,
	// stopped or sleeping; "was": the recorded status; "error" when its teardown failed).
	AuditRecovered = "sandbox.recovered"
	// AuditContainerRemoved: recovery removed a container without a record (or on another
	// runtime than its record names); "runtime".
	AuditContainerRemoved = "container.removed"
	// AuditMemoryGuardKill: the gVisor runtime's memory guard killed a process group of the
	// sandbox near its host memory limit ("pgid", "processes", "rounds", "usage", "trigger",
	// "hostLimit" in bytes; "error" when a kill was refused). Recorded by the daemon
	// (runsc.Config.OnGuardKill).
	AuditMemoryGuardKill = "sandbox.memory_guard_kill"
)

// audit records one decision (no-op without an Auditor).
func (m *Manager) audit(ctx context.Context, action, id string, attrs ...slog.Attr) {
	if m.auditor != nil {
		m.auditor.Decision(ctx, action, id, attrs...)
	}
}

// auditSleep records the end of a sleep of id for reason: slept with mode (SleepModeMemory
// or SleepModeDisk), or failed with err.
func (m *Manager) auditSleep(ctx context.Context, id, reason, mode string, err error) {
	if err != nil {
		m.audit(ctx, AuditSleepFailed, id, slog.String("reason", reason), slog.String("error", err.Error()))
		return
	}
	m.audit(ctx, AuditSlept, id, slog.String("reason", reason), slog.String("mode", mode))
}

// auditStart records the end of a start of rec (its status before the start): woke or started,
// or failed with err.
func (m *Manager) auditStart(ctx context.Context, rec store.Sandbox, err error) {
	from := slog.String("from", string(rec.Status))
	switch {
	case err != nil:
		m.audit(ctx, AuditStartFailed, rec.ID, from, slog.String("error", err.Error()))
	case statusOf(rec) == StatusSleeping:
		m.audit(ctx, AuditWoke, rec.ID)
	default:
		m.audit(ctx, AuditStarted, rec.ID, from)
	}
}

// auditSettings records rec's sleep settings after a change.
func (m *Manager) auditSettings(ctx context.Context, rec store.Sandbox) {
	m.audit(ctx, AuditSettings, rec.ID, slog.String("sleepAfter", FormatSleepAfter(rec.SleepAfter)),
		slog.Bool("keepAlive", rec.KeepAlive), slog.Bool("snapshotOnSleep", rec.SnapshotOnSleep))
}

// auditSleepSnapshot records the snapshot taken at sleep of id: its ID, or err.
func (m *Manager) auditSleepSnapshot(ctx context.Context, id, snapshot string, err error) {
	if err != nil {
		m.audit(ctx, AuditSleepSnapshot, id, slog.Bool("ok", false), slog.String("error", err.Error()))
		return
	}
	m.audit(ctx, AuditSleepSnapshot, id, slog.Bool("ok", true), slog.String("snapshot", snapshot))
}

// auditRecovered records what Recover did with rec: outcome, or the teardown's err.
func (m *Manager) auditRecovered(ctx context.Context, rec store.Sandbox, outcome string, err error) {
	attrs := []slog.Attr{slog.String("outcome", outcome), slog.String("was", string(rec.Status))}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	m.audit(ctx, AuditRecovered, rec.ID, attrs...)
}

// auditContainerRemoved records that recovery removed container id of runtime rt.
func (m *Manager) auditContainerRemoved(ctx context.Context, id, rt string) {
	m.audit(ctx, AuditContainerRemoved, id, slog.String("runtime", rt))
}
