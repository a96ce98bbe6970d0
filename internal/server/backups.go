package server

import (
	"context"
	"net/http"
	"time"

	v1 "github.com/hutchdev/hutch/api/v1"
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

// createBackup: POST /v1/sandboxes/{id}/backups {dir, name?, ttl?, excludes?, gitignore?} →
// 201 {success, id, sandboxId, dir, name, sizeBytes, createdAt, expiresAt, warnings?, timestamp}.
func (s *Server) createBackup(w http.ResponseWriter, r *http.Request) {
	if !s.backupsEnabled(w, r) {
		return
	}
	var req v1.BackupRequest
	if err := readJSON(w, r, &req); err != nil {
		writeError(w, r, err, "backup.create")
		return
	}
	b, err := s.backups.Create(r.Context(), r.PathValue("id"), fromBackupRequest(req))
	if err != nil {
		writeError(w, r, err, "backup.create")
		return
	}
	writeJSON(w, http.StatusCreated, v1.BackupReply{Success: true, Backup: toBackup(b), Timestamp: time.Now().UTC()})
}

// restoreBackup: POST /v1/sandboxes/{id}/backups/{bid}/restore {dir?, mode?} → {success, id,
// dir, mode, durationMs, timestamp}.
func (s *Server) restoreBackup(w http.ResponseWriter, r *http.Request) {
	if !s.backupsEnabled(w, r) {
		return
	}
	var req v1.RestoreBackupRequest
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
	writeJSON(w, http.StatusOK, v1.RestoreBackupReply{Success: true, RestoreResult: v1.RestoreResult{ID: b.ID, Dir: b.Dir, Mode: mode,
		DurationMs: float64(time.Since(start).Microseconds()) / 1000}, Timestamp: time.Now().UTC()})
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
	writeJSON(w, http.StatusOK, v1.BackupList{Reply: v1.Stamped(), Backups: toBackups(list)})
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
	writeJSON(w, http.StatusOK, v1.BackupReply{Success: true, Backup: toBackup(b), Timestamp: time.Now().UTC()})
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
	writeJSON(w, http.StatusOK, v1.Deleted{Reply: v1.Stamped(), ID: id})
}

// backupsEnabled answers NOT_IMPLEMENTED when the server has no backup service.
func (s *Server) backupsEnabled(w http.ResponseWriter, r *http.Request) bool {
	if s.backups == nil {
		writeError(w, r, errdefs.New(errdefs.CodeNotImplemented, "backups are not available on this server"), "")
		return false
	}
	return true
}
