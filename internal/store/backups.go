package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// Backup is the record of one directory backup (package backup). Backups outlive their
// sandbox: the row has no foreign key to sandboxes.
type Backup struct {
	ID        string
	SandboxID string // the sandbox it was taken in
	Dir       string // the directory archived
	Name      string
	SizeBytes int64 // size of the compressed archive
	CreatedAt time.Time
	ExpiresAt time.Time
}

const backupColumns = `id, sandbox_id, dir, name, size_bytes, created_at, expires_at`

// InsertBackup adds (or replaces) the record b.
func (s *Store) InsertBackup(ctx context.Context, b Backup) error {
	_, err := s.db.ExecContext(ctx, `INSERT OR REPLACE INTO backups (`+backupColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		b.ID, b.SandboxID, b.Dir, b.Name, b.SizeBytes, b.CreatedAt.UnixNano(), b.ExpiresAt.UnixNano())
	if err != nil {
		return fmt.Errorf("store: insert backup %s: %w", b.ID, err)
	}
	return nil
}

// GetBackup returns the record of backup id; unknown → errdefs.CodeBackupNotFound.
func (s *Store) GetBackup(ctx context.Context, id string) (Backup, error) {
	b, err := scanBackup(s.db.QueryRowContext(ctx, `SELECT `+backupColumns+` FROM backups WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Backup{}, errdefs.Newf(errdefs.CodeBackupNotFound, "backup %q not found", id).With("id", id)
	}
	return b, err
}

// ListBackups returns the records of sandbox sandboxID's backups, or of all backups when
// sandboxID is empty, oldest first.
func (s *Store) ListBackups(ctx context.Context, sandboxID string) ([]Backup, error) {
	q := `SELECT ` + backupColumns + ` FROM backups ORDER BY created_at, id`
	var args []any
	if sandboxID != "" {
		q = `SELECT ` + backupColumns + ` FROM backups WHERE sandbox_id = ? ORDER BY created_at, id`
		args = append(args, sandboxID)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list backups: %w", err)
	}
	defer rows.Close()
	var out []Backup
	for rows.Next() {
		b, err := scanBackup(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// DeleteBackup removes the record of backup id; an unknown id is not an error.
func (s *Store) DeleteBackup(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM backups WHERE id = ?`, id); err != nil {
		return fmt.Errorf("store: delete backup %s: %w", id, err)
	}
	return nil
}

func scanBackup(r scanner) (Backup, error) {
	var (
		b                Backup
		created, expires int64
	)
	if err := r.Scan(&b.ID, &b.SandboxID, &b.Dir, &b.Name, &b.SizeBytes, &created, &expires); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Backup{}, err
		}
		return Backup{}, fmt.Errorf("store: scan backup: %w", err)
	}
	b.CreatedAt = time.Unix(0, created).UTC()
	b.ExpiresAt = time.Unix(0, expires).UTC()
	return b, nil
}
