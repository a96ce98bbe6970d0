package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// SandboxCA is a sandbox's egress CA: the certificate in clear, the private key sealed by
// internal/secret. Rows go away with their sandbox (ON DELETE CASCADE).
type SandboxCA struct {
	SandboxID string
	CertPEM   string
	KeySealed []byte
	CreatedAt time.Time
}

// InsertCA stores ca unless the sandbox already has one, and returns the stored row (the
// existing one when there was one: the first CA made wins). Unknown sandbox →
// SANDBOX_NOT_FOUND.
func (s *Store) InsertCA(ctx context.Context, ca SandboxCA) (SandboxCA, error) {
	if ca.CreatedAt.IsZero() {
		ca.CreatedAt = time.Now().UTC()
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return SandboxCA{}, fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback()
	if err := sandboxExists(ctx, tx, ca.SandboxID); err != nil {
		return SandboxCA{}, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sandbox_cas (sandbox_id, cert_pem, key_sealed, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT(sandbox_id) DO NOTHING`, ca.SandboxID, ca.CertPEM, ca.KeySealed, ca.CreatedAt.UnixNano()); err != nil {
		return SandboxCA{}, fmt.Errorf("store: insert ca: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return SandboxCA{}, fmt.Errorf("store: commit: %w", err)
	}
	return s.GetCA(ctx, ca.SandboxID)
}

// GetCA returns sandboxID's CA. None → NOT_FOUND (class ErrNotFound).
func (s *Store) GetCA(ctx context.Context, sandboxID string) (SandboxCA, error) {
	var ca SandboxCA
	var c int64
	err := s.db.QueryRowContext(ctx, `SELECT sandbox_id, cert_pem, key_sealed, created_at FROM sandbox_cas WHERE sandbox_id = ?`, sandboxID).
		Scan(&ca.SandboxID, &ca.CertPEM, &ca.KeySealed, &c)
	if errors.Is(err, sql.ErrNoRows) {
		return SandboxCA{}, errdefs.Newf(errdefs.CodeNotFound, "sandbox %q has no egress CA", sandboxID).With("id", sandboxID)
	}
	if err != nil {
		return SandboxCA{}, fmt.Errorf("store: get ca: %w", err)
	}
	ca.CreatedAt = fromNano(c)
	return ca, nil
}

// PutSnapshotCA records the CA a snapshot was taken with: ca is its sandbox's row (key sealed
// for ca.SandboxID). A snapshot keeps the first CA recorded for it. Rows outlive the sandbox.
func (s *Store) PutSnapshotCA(ctx context.Context, snapshotID string, ca SandboxCA) error {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO snapshot_cas (snapshot_id, sandbox_id, cert_pem, key_sealed, created_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT(snapshot_id) DO NOTHING`,
		snapshotID, ca.SandboxID, ca.CertPEM, ca.KeySealed, time.Now().UTC().UnixNano()); err != nil {
		return fmt.Errorf("store: put snapshot ca: %w", err)
	}
	return nil
}

// GetSnapshotCA returns the CA snapshotID was taken with; SandboxID is the sandbox whose key
// sealing it carries. None → NOT_FOUND (class ErrNotFound).
func (s *Store) GetSnapshotCA(ctx context.Context, snapshotID string) (SandboxCA, error) {
	var ca SandboxCA
	var c int64
	err := s.db.QueryRowContext(ctx, `SELECT sandbox_id, cert_pem, key_sealed, created_at FROM snapshot_cas WHERE snapshot_id = ?`, snapshotID).
		Scan(&ca.SandboxID, &ca.CertPEM, &ca.KeySealed, &c)
	if errors.Is(err, sql.ErrNoRows) {
		return SandboxCA{}, errdefs.Newf(errdefs.CodeNotFound, "snapshot %q has no egress CA", snapshotID).With("snapshot", snapshotID)
	}
	if err != nil {
		return SandboxCA{}, fmt.Errorf("store: get snapshot ca: %w", err)
	}
	ca.CreatedAt = fromNano(c)
	return ca, nil
}
