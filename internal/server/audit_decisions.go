package server

import (
	"context"
	"log/slog"

	"github.com/hutchdev/hutch/internal/sandbox"
)

// DecisionLog writes the lifecycle decisions of the sandbox Manager (sandbox.Auditor) to the
// audit log, next to the API's request records: one record per decision with "action" (the
// sandbox.Audit* names: sandbox.slept with its reason, sandbox.woke, sandbox.start_failed,
// sandbox.recovered, …), "by": "hutchd", "id" (the sandbox) and the decision's attributes.
// Every string is bounded by AuditFieldMax. API records carry "by": "api".
type DecisionLog struct{ l *slog.Logger }

var _ sandbox.Auditor = (*DecisionLog)(nil)

// NewDecisionLog returns a DecisionLog writing to l (the logger given to SetAuditLog).
func NewDecisionLog(l *slog.Logger) *DecisionLog { return &DecisionLog{l: l} }

// Decision records one decision (sandbox.Auditor).
func (d *DecisionLog) Decision(ctx context.Context, action, id string, attrs ...slog.Attr) {
	out := make([]slog.Attr, 0, len(attrs)+3)
	out = append(out, slog.String("action", bounded(action)), slog.String("by", "hutchd"))
	if id != "" {
		out = append(out, slog.String("id", bounded(id)))
	}
	for _, a := range attrs {
		if a.Value.Kind() == slog.KindString {
			a.Value = slog.StringValue(bounded(a.Value.String()))
		}
		out = append(out, a)
	}
	d.l.LogAttrs(ctx, slog.LevelInfo, "audit", out...)
}
