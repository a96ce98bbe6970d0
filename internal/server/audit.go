package server

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"
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
}

// SetAuditLog records every lifecycle decision made through the API (create, start, stop,
// sleep, wake, destroy, snapshot, fork, restore, backup, port exposure, image build) and every
// refused authentication on l, one record per request: action, sandbox, snapshot or backup ID
// from the path, HTTP status, client address, duration. No bodies, tokens or environment
// values are recorded. Call it before serving.
func (s *Server) SetAuditLog(l *slog.Logger) { s.audit = l }

// auditNoteKey carries an *auditNote in a request's context while an audit log is set.
type auditNoteKey struct{}

// auditNote is what a handler adds to its request's audit record: the ID of what it created,
// which is not in the path.
type auditNote struct{ id string }

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

// recordAudit writes the audit record of a finished request, if it is one to record.
func (s *Server) recordAudit(r *http.Request, note *auditNote, status int, took time.Duration) {
	if s.audit == nil {
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
	client, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		client = r.RemoteAddr
	}
	attrs := []slog.Attr{
		slog.String("action", action),
		slog.Int("status", status),
		slog.Bool("ok", status < 400),
		slog.String("client", client),
		slog.Int64("durationMs", took.Milliseconds()),
	}
	if note != nil && note.id != "" && r.PathValue("id") == "" {
		attrs = append(attrs, slog.String("id", note.id))
	}
	for _, k := range []string{"id", "sid", "bid", "port"} {
		if v := r.PathValue(k); v != "" {
			attrs = append(attrs, slog.String(k, v))
		}
	}
	if refused {
		attrs = append(attrs, slog.String("method", r.Method), slog.String("path", r.URL.Path))
	}
	s.audit.LogAttrs(r.Context(), slog.LevelInfo, "audit", attrs...)
}
