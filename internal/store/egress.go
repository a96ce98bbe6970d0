package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// EgressPolicy is a sandbox's stored egress policy: the policy.Spec as JSON. Rows go away
// with their sandbox (ON DELETE CASCADE).
type EgressPolicy struct {
	SandboxID string
	SpecJSON  string
	UpdatedAt time.Time
}

// PutEgressPolicy stores (inserts or replaces) sandboxID's policy JSON. Unknown sandbox →
// SANDBOX_NOT_FOUND.
func (s *Store) PutEgressPolicy(ctx context.Context, sandboxID, specJSON string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback()
	if err := sandboxExists(ctx, tx, sandboxID); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO egress_policies (sandbox_id, spec_json, updated_at) VALUES (?, ?, ?)
		ON CONFLICT(sandbox_id) DO UPDATE SET spec_json = excluded.spec_json, updated_at = excluded.updated_at`,
		sandboxID, specJSON, time.Now().UTC().UnixNano()); err != nil {
		return fmt.Errorf("store: put egress policy: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

// GetEgressPolicy returns sandboxID's stored policy. None → NOT_FOUND (class ErrNotFound).
func (s *Store) GetEgressPolicy(ctx context.Context, sandboxID string) (EgressPolicy, error) {
	p := EgressPolicy{SandboxID: sandboxID}
	var at int64
	err := s.db.QueryRowContext(ctx, `SELECT spec_json, updated_at FROM egress_policies WHERE sandbox_id = ?`, sandboxID).Scan(&p.SpecJSON, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return EgressPolicy{}, errdefs.Newf(errdefs.CodeNotFound, "sandbox %q has no egress policy", sandboxID).With("id", sandboxID)
	}
	if err != nil {
		return EgressPolicy{}, fmt.Errorf("store: get egress policy: %w", err)
	}
	p.UpdatedAt = fromNano(at)
	return p, nil
}

// ListEgressPolicies returns every stored policy (for loading at hutchd start), by sandbox ID.
func (s *Store) ListEgressPolicies(ctx context.Context) ([]EgressPolicy, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT sandbox_id, spec_json, updated_at FROM egress_policies ORDER BY sandbox_id`)
	if err != nil {
		return nil, fmt.Errorf("store: list egress policies: %w", err)
	}
	defer rows.Close()
	var out []EgressPolicy
	for rows.Next() {
		var p EgressPolicy
		var at int64
		if err := rows.Scan(&p.SandboxID, &p.SpecJSON, &at); err != nil {
			return nil, fmt.Errorf("store: list egress policies: %w", err)
		}
		p.UpdatedAt = fromNano(at)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list egress policies: %w", err)
	}
	return out, nil
}

// DeleteEgressPolicy removes sandboxID's policy (allow-all again). None is not an error.
func (s *Store) DeleteEgressPolicy(ctx context.Context, sandboxID string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM egress_policies WHERE sandbox_id = ?`, sandboxID); err != nil {
		return fmt.Errorf("store: delete egress policy: %w", err)
	}
	return nil
}
