package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// DirMount is a backup restored as a mount: directory Path of sandbox SandboxID shows the
// backup's tree (read-only, shared) below the sandbox's own changes, which live in the mount's
// own upper directory named by MountID. Rows go away with their sandbox (ON DELETE CASCADE).
type DirMount struct {
	SandboxID string
	Path      string // absolute, clean path inside the sandbox
	BackupID  string
	MountID   string // names the mount's upper and work directories on the host
	CreatedAt time.Time
}

// PutDirMount records m, replacing the mount at m.Path and dropping every mount below it (the
// new one hides them), in one transaction, and returns the rows it replaced or dropped, so the
// caller can remove their directories. Errors: SANDBOX_NOT_FOUND.
func (s *Store) PutDirMount(ctx context.Context, m DirMount) ([]DirMount, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback()
	if err := sandboxExists(ctx, tx, m.SandboxID); err != nil {
		return nil, err
	}
	old, err := dirMounts(ctx, tx, m.SandboxID)
	if err != nil {
		return nil, err
	}
	var gone []DirMount
	for _, o := range old {
		if o.Path == m.Path || strings.HasPrefix(o.Path, strings.TrimSuffix(m.Path, "/")+"/") {
			gone = append(gone, o)
			if _, err := tx.ExecContext(ctx, `DELETE FROM dir_mounts WHERE sandbox_id = ? AND path = ?`, o.SandboxID, o.Path); err != nil {
				return nil, fmt.Errorf("store: drop mount %s of %s: %w", o.Path, o.SandboxID, err)
			}
		}
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = time.Now().UTC()
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO dir_mounts (sandbox_id, path, backup_id, mount_id, created_at) VALUES (?, ?, ?, ?, ?)`,
		m.SandboxID, m.Path, m.BackupID, m.MountID, m.CreatedAt.UnixNano()); err != nil {
		return nil, fmt.Errorf("store: insert mount %s of %s: %w", m.Path, m.SandboxID, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: commit: %w", err)
	}
	return gone, nil
}

// DirMounts returns sandbox id's mounts, parents before children (by path length, then path).
// An unknown sandbox has none.
func (s *Store) DirMounts(ctx context.Context, id string) ([]DirMount, error) {
	return dirMounts(ctx, s.db, id)
}

// DeleteDirMounts drops every mount of sandbox id and returns them.
func (s *Store) DeleteDirMounts(ctx context.Context, id string) ([]DirMount, error) {
	ms, err := dirMounts(ctx, s.db, id)
	if err != nil {
		return nil, err
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM dir_mounts WHERE sandbox_id = ?`, id); err != nil {
		return nil, fmt.Errorf("store: drop mounts of %s: %w", id, err)
	}
	return ms, nil
}

// DeleteDirMount drops the mount at path of sandbox id; a missing row is not an error.
func (s *Store) DeleteDirMount(ctx context.Context, id, path string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM dir_mounts WHERE sandbox_id = ? AND path = ?`, id, path); err != nil {
		return fmt.Errorf("store: drop mount %s of %s: %w", path, id, err)
	}
	return nil
}

// MountedBackups returns the IDs of the backups some sandbox has mounted.
func (s *Store) MountedBackups(ctx context.Context) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT backup_id FROM dir_mounts`)
	if err != nil {
		return nil, fmt.Errorf("store: mounted backups: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: mounted backups: %w", err)
		}
		out[id] = true
	}
	return out, rows.Err()
}

func dirMounts(ctx context.Context, q querier, id string) ([]DirMount, error) {
	rows, err := q.QueryContext(ctx, `SELECT sandbox_id, path, backup_id, mount_id, created_at FROM dir_mounts
		WHERE sandbox_id = ? ORDER BY length(path), path`, id)
	if err != nil {
		return nil, fmt.Errorf("store: mounts of %s: %w", id, err)
	}
	defer rows.Close()
	var out []DirMount
	for rows.Next() {
		var m DirMount
		var created int64
		if err := rows.Scan(&m.SandboxID, &m.Path, &m.BackupID, &m.MountID, &created); err != nil {
			return nil, fmt.Errorf("store: mounts of %s: %w", id, err)
		}
		m.CreatedAt = time.Unix(0, created).UTC()
		out = append(out, m)
	}
	return out, rows.Err()
}

// querier is what reads need of *sql.DB and *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}
