package server

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/hutchdev/hutch/internal/auditlog"
)

// auditActions are the lifecycle decisions recorded in the audit log, by route pattern.
var auditActions = map[string]string{
	"POST /v1/sandboxes":                            "sandbox.create",
	"DELETE /v1/sandboxes/{id}":                     "sandbox.destroy",
	"POST /v1/sandboxes/{id}/start":                 "sandbox.start",
	"POST /v1/sandboxes/{id}/stop":                  "sandbox.stop",
	"PATCH /v1/sandboxes/{id}":                      "sandbox.update",
	"POST /v1/sandboxes/{id}/sleep":                 "sandbox.sleep",
	"POST /v1/sandboxes/{id}/wake":                  "sandbox.wake",
	"POST /v1/sandboxes/{id}/snapshots":             "snapshot.create",
	"POST /v1/sandboxes/{id}/fork":                  "sandbox.fork",
	"POST /v1/sandboxes/{id}/restore-snapshot":      "snapshot.restore",
	"DELETE /v1/snapshots/{sid}":                    "snapshot.delete",
	"POST /v1/sandboxes/{id}/backups":               "backup.create",
	"POST /v1/sandboxes/{id}/backups/{bid}/restore": "backup.restore",
	"DELETE /v1/backups/{bid}":                      "backup.delete",
	"POST /v1/sandboxes/{id}/ports":                 "port.expose",
	"DELETE /v1/sandboxes/{id}/ports/{port}":        "port.unexpose",
	"POST /v1/images/build":                         "image.build",
	"PUT /v1/secrets/{name}":                        "secret.set",
	"DELETE /v1/secrets/{name}":                     "secret.delete",
	"PUT /v1/sandboxes/{id}/egress":                 "egress.put",
	"PATCH /v1/sandboxes/{id}/egress":               "egress.patch",
}

// Deps.AuditLog records every lifecycle decision made through the API (create, start, stop,
// sleep, wake, destroy, snapshot, fork, restore, backup, port exposure, image build, secret
// set and delete, egress policy put and patch) and every refused authentication, one
// record per request: action, sandbox, snapshot or backup ID or secret name from the path,
// HTTP status, client address, duration; a refused authentication adds method, path and user
// agent. Records carry "by": "api"; the decisions hutchd takes by itself go to the same log
// through an auditlog.DecisionLog ("by": "hutchd"). A get-or-create POST /v1/sandboxes that found the sandbox (200) is not a creation
// and is not recorded. No bodies, tokens, secret values or environment values are recorded,
// and every string is bounded by auditlog.FieldMax. auditlog.Open bounds its size on disk.

// auditNoteKey carries an *auditNote in a request's context while an audit log is set.
type auditNoteKey struct{}

// auditNote is what a handler adds to its request's audit record: the ID of what it created,
// which is not in the path; limited marks a request the rate limit refused (not recorded).
type auditNote struct {
	id      string
	limited bool
}

// withAuditNote returns r with an empty note in its context.
func withAuditNote(r *http.Request) (*http.Request, *auditNote) {
	n := &auditNote{}
	return r.WithContext(context.WithValue(r.Context(), auditNoteKey{}, n)), n
}

// noteAuditID records id as the subject of r's audit record (no-op without an audit log).
func noteAuditID(r *http.Request, id string) {
	if n, ok := r.Context().Value(auditNoteKey{}).(*auditNote); ok {
		n.id = id
	}
}

// noteRateLimited marks r as refused by the rate limit: its 429 is not recorded.
func noteRateLimited(r *http.Request) {
	if n, ok := r.Context().Value(auditNoteKey{}).(*auditNote); ok {
		n.limited = true
	}
}

// recordAudit writes the audit record of a finished request, if it is one to record.
func (s *Server) recordAudit(r *http.Request, note *auditNote, status int, took time.Duration) {
	if s.audit == nil || note != nil && note.limited {
		return
	}
	action, ok := auditActions[r.Pattern]
	refused := status == http.StatusUnauthorized
	if !ok && !refused {
		return
	}
	if refused {
		action = "auth.refused"
	}
	if action == "sandbox.create" && status < 300 && status != http.StatusCreated {
		return // get-or-create found an existing sandbox: nothing was decided
	}
	attrs := []slog.Attr{
		slog.String("action", action),
		slog.String("by", "api"),
		slog.Int("status", status),
		slog.Bool("ok", status < 400),
		slog.String("client", bounded(clientIP(r))),
		slog.Int64("durationMs", took.Milliseconds()),
	}
	if note != nil && note.id != "" && r.PathValue("id") == "" {
		attrs = append(attrs, slog.String("id", bounded(note.id)))
	}
	for _, k := range []string{"id", "sid", "bid", "port", "name"} {
		if v := r.PathValue(k); v != "" {
			attrs = append(attrs, slog.String(k, bounded(v)))
		}
	}
	if refused {
		attrs = append(attrs, slog.String("method", bounded(r.Method)), slog.String("path", bounded(r.URL.Path)))
		if ua := r.UserAgent(); ua != "" {
			attrs = append(attrs, slog.String("userAgent", bounded(ua)))
		}
	}
	s.audit.LogAttrs(r.Context(), slog.LevelInfo, "audit", attrs...)
}

// bounded is auditlog.Bound: the record's strings are bounded like the decisions'.
func bounded(v string) string { return auditlog.Bound(v) }
