package store

import (
	"context"
	"fmt"
)

// EnsurePlaceholder returns sandboxID's placeholder for secret, storing candidate first when
// there is none yet (so a placeholder never changes once made: processes keep it across
// sleep, wake and secret rotation). Unknown sandbox → SANDBOX_NOT_FOUND.
func (s *Store) EnsurePlaceholder(ctx context.Context, sandboxID, secret, candidate string) (string, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback()
	if err := sandboxExists(ctx, tx, sandboxID); err != nil {
		return "", err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO egress_placeholders (sandbox_id, secret, placeholder) VALUES (?, ?, ?)
		ON CONFLICT(sandbox_id, secret) DO NOTHING`, sandboxID, secret, candidate); err != nil {
		return "", fmt.Errorf("store: insert placeholder: %w", err)
	}
	var ph string
	if err := tx.QueryRowContext(ctx, `SELECT placeholder FROM egress_placeholders WHERE sandbox_id = ? AND secret = ?`, sandboxID, secret).Scan(&ph); err != nil {
		return "", fmt.Errorf("store: placeholder: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("store: commit: %w", err)
	}
	return ph, nil
}

// Placeholders returns sandboxID's placeholders, secret name → placeholder.
func (s *Store) Placeholders(ctx context.Context, sandboxID string) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT secret, placeholder FROM egress_placeholders WHERE sandbox_id = ?`, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("store: placeholders: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var sec, ph string
		if err := rows.Scan(&sec, &ph); err != nil {
			return nil, fmt.Errorf("store: placeholders: %w", err)
		}
		out[sec] = ph
	}
	return out, rows.Err()
}
