// Package auditlog is hutchd's audit log: one JSON line per lifecycle decision, whether asked
// for through the API ("by": "api", recorded by internal/server) or taken by hutchd itself
// ("by": "hutchd", DecisionLog), in one size-bounded file of the state directory. No record
// holds a body, a token, a secret value or an environment value, and every string in it is cut
// to FieldMax bytes (Bound): a request or a sandbox can make hutchd write only a bounded
// record.
package auditlog

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"unicode/utf8"

	"github.com/hutchdev/hutch/internal/logbound"
)

// File is the audit log's name in the state directory: JSON lines appended across restarts,
// rotated at a size bound to File.1 … File.<keep>.
const File = "audit.log"

// FieldMax is the most bytes of any string recorded in an audit record (path, IDs, method,
// user agent, …): a longer one is cut at a UTF-8 boundary and ends with "…[N bytes]", N its
// full length. One record is at most a few KiB.
const FieldMax = 256

// Bound is v cut to FieldMax bytes (at a rune boundary) plus "…[N bytes]" when longer.
func Bound(v string) string {
	if len(v) <= FieldMax {
		return v
	}
	cut := FieldMax
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut] + "…[" + strconv.Itoa(len(v)) + " bytes]"
}

// Log is an open audit log file and the JSON logger that writes to it.
type Log struct {
	file   *logbound.RotatingFile
	logger *slog.Logger
}

// Open opens the audit log at path for appending (mode 0600), rotated at maxBytes keeping keep
// rotated files (logbound.RotatingFile).
func Open(path string, maxBytes int64, keep int) (*Log, error) {
	f, err := logbound.OpenRotatingFile(path, maxBytes, keep)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return &Log{file: f, logger: slog.New(slog.NewJSONHandler(f, nil))}, nil
}

// Logger is the JSON logger writing to the file: the API's request records go here.
func (l *Log) Logger() *slog.Logger { return l.logger }

// Close closes the file.
func (l *Log) Close() error { return l.file.Close() }

// DecisionLog writes the lifecycle decisions of the sandbox Manager (it implements
// sandbox.Auditor) to the audit log, next to the API's request records: one record per
// decision with "action" (the sandbox.Audit* names: sandbox.slept with its reason,
// sandbox.woke, sandbox.start_failed, sandbox.recovered, …), "by": "hutchd", "id" (the sandbox)
// and the decision's attributes. Every string is bounded by FieldMax.
type DecisionLog struct{ l *slog.Logger }

// NewDecisionLog returns a DecisionLog writing to l (a Log's Logger).
func NewDecisionLog(l *slog.Logger) *DecisionLog { return &DecisionLog{l: l} }

// Decision records one decision (sandbox.Auditor).
func (d *DecisionLog) Decision(ctx context.Context, action, id string, attrs ...slog.Attr) {
	out := make([]slog.Attr, 0, len(attrs)+3)
	out = append(out, slog.String("action", Bound(action)), slog.String("by", "hutchd"))
	if id != "" {
		out = append(out, slog.String("id", Bound(id)))
	}
	for _, a := range attrs {
		if a.Value.Kind() == slog.KindString {
			a.Value = slog.StringValue(Bound(a.Value.String()))
		}
		out = append(out, a)
	}
	d.l.LogAttrs(ctx, slog.LevelInfo, "audit", out...)
}
