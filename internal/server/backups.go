package server

import (
	"context"
	"net/http"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/backup"
)

// Backups is what the API needs of the backup service; *backup.Service implements it.
type Backups interface {
	Create(ctx context.Context, sandboxID string, req backup.CreateRequest) (backup.Backup, error)
	Restore(ctx context.Context, sandboxID, backupID, dir, mode string) (backup.Backup, string, error)
	Get(ctx context.Context, id string) (backup.Backup, error)
	List(ctx context.Context, sandboxID string) ([]backup.Backup, error)
	Delete(ctx context.Context, id string) error
}

// backupReply is a backup in a reply: the record plus success and timestamp.
type backupReply struct {
	Success bool `json:"success"`
	backup.Backup
	Timestamp time.Time `json:"timestamp"`
}

// createBackup: POST /v1/sandboxes/{id}/backups {dir, name?, ttl?, excludes?, gitignore?} →
// 201 {success, id, sandboxId, dir, name, sizeBytes, createdAt, expiresAt, warnings?, timestamp}.
func (s *Server) createBackup(w http.ResponseWriter, r *http.Request) {
	if !s.backupsEnabled(w, r) {
		return
	}
	var req backup.CreateRequest
	if err := readJSON(w, r, &req); err != nil {
		writeError(w, r, err, "backup.create")
		return
	}
	b, err := s.backups.Create(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, r, err, "backup.create")
		return
	}
	writeJSON(w, http.StatusCreated, backupReply{true, b, time.Now().UTC()})
}

// restoreBackup: POST /v1/sandboxes/{id}/backups/{bid}/restore {dir?, mode?} → {success, id,
// dir, mode, durationMs, timestamp}.
func (s *Server) restoreBackup(w http.ResponseWriter, r *http.Request) {
	if !s.backupsEnabled(w, r) {
		return
	}
	var req struct {
		Dir  string `json:"dir"`
		Mode string `json:"mode"`
	}
	if err := readJSON(w, r, &req); err != nil {
		writeError(w, r, err, "backup.restore")
		return
	}
	start := time.Now()
	b, mode, err := s.backups.Restore(r.Context(), r.PathValue("id"), r.PathValue("bid"), req.Dir, req.Mode)
	if err != nil {
		writeError(w, r, err, "backup.restore")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "id": b.ID, "dir": b.Dir, "mode": mode,
		"durationMs": float64(time.Since(start).Microseconds()) / 1000, "timestamp": time.Now().UTC()})
}

// listBackups: GET /v1/backups[?sandbox=ID] → {success, backups: [...], timestamp}.
func (s *Server) listBackups(w http.ResponseWriter, r *http.Request) {
	if !s.backupsEnabled(w, r) {
		return
	}
	list, err := s.backups.List(r.Context(), r.URL.Query().Get("sandbox"))
	if err != nil {
		writeError(w, r, err, "backup.list")
		return
	}
	if list == nil {
		list = []backup.Backup{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "backups": list, "timestamp": time.Now().UTC()})
}

// getBackup: GET /v1/backups/{bid} → {success, id, sandboxId, dir, name, sizeBytes, createdAt,
// expiresAt, timestamp}.
func (s *Server) getBackup(w http.ResponseWriter, r *http.Request) {
	if !s.backupsEnabled(w, r) {
		return
	}
	b, err := s.backups.Get(r.Context(), r.PathValue("bid"))
	if err != nil {
		writeError(w, r, err, "backup.get")
		return
	}
	writeJSON(w, http.StatusOK, backupReply{true, b, time.Now().UTC()})
}

// deleteBackup: DELETE /v1/backups/{bid} → {success, id, timestamp}.
func (s *Server) deleteBackup(w http.ResponseWriter, r *http.Request) {
	if !s.backupsEnabled(w, r) {
		return
	}
	id := r.PathValue("bid")
	if err := s.backups.Delete(r.Context(), id); err != nil {
		writeError(w, r, err, "backup.delete")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "id": id, "timestamp": time.Now().UTC()})
}

// backupsEnabled answers NOT_IMPLEMENTED when the server has no backup service.
func (s *Server) backupsEnabled(w http.ResponseWriter, r *http.Request) bool {
	if s.backups == nil {
		writeError(w, r, errdefs.New(errdefs.CodeNotImplemented, "backups are not available on this server"), "")
		return false
	}
	return true
}
