package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// SecretRow is one stored secret: its name and sealed value (internal/secret seals and opens
// it; the store never sees a plaintext value).
type SecretRow struct {
	Name      string
	Sealed    []byte
	CreatedAt time.Time
	UpdatedAt time.Time
}

// PutSecret inserts or replaces the secret name (CreatedAt kept on replace) and returns the
// stored row's times.
func (s *Store) PutSecret(ctx context.Context, name string, sealed []byte) (SecretRow, error) {
	now := time.Now().UTC()
	_, err := s.db.ExecContext(ctx, `INSERT INTO secrets (name, value_sealed, created_at, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT(name) DO UPDATE SET value_sealed = excluded.value_sealed, updated_at = excluded.updated_at`,
		name, sealed, now.UnixNano(), now.UnixNano())
	if err != nil {
		return SecretRow{}, fmt.Errorf("store: put secret: %w", err)
	}
	return s.GetSecret(ctx, name)
}

// GetSecret returns the secret name. Unknown → SECRET_NOT_FOUND.
func (s *Store) GetSecret(ctx context.Context, name string) (SecretRow, error) {
	var r SecretRow
	var c, u int64
	err := s.db.QueryRowContext(ctx, `SELECT name, value_sealed, created_at, updated_at FROM secrets WHERE name = ?`, name).
		Scan(&r.Name, &r.Sealed, &c, &u)
	if errors.Is(err, sql.ErrNoRows) {
		return SecretRow{}, errdefs.Newf(errdefs.CodeSecretNotFound, "secret %q not found", name).With("name", name)
	}
	if err != nil {
		return SecretRow{}, fmt.Errorf("store: get secret: %w", err)
	}
	r.CreatedAt, r.UpdatedAt = fromNano(c), fromNano(u)
	return r, nil
}

// ListSecrets returns every secret, ordered by name.
func (s *Store) ListSecrets(ctx context.Context) ([]SecretRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, value_sealed, created_at, updated_at FROM secrets ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: list secrets: %w", err)
	}
	defer rows.Close()
	var out []SecretRow
	for rows.Next() {
		var r SecretRow
		var c, u int64
		if err := rows.Scan(&r.Name, &r.Sealed, &c, &u); err != nil {
			return nil, fmt.Errorf("store: list secrets: %w", err)
		}
		r.CreatedAt, r.UpdatedAt = fromNano(c), fromNano(u)
		out = append(out, r)
	}
	return out, rows.Err()
}

// DeleteSecret removes the secret name. Unknown → SECRET_NOT_FOUND.
func (s *Store) DeleteSecret(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM secrets WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("store: delete secret: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errdefs.Newf(errdefs.CodeSecretNotFound, "secret %q not found", name).With("name", name)
	}
	return nil
}

// EgressSpecsForSecrets returns every sandbox's stored egress policy JSON (sandbox ID →
// spec_json), read-only, so the secrets API can tell which sandboxes use a secret.
func (s *Store) EgressSpecsForSecrets(ctx context.Context) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT sandbox_id, spec_json FROM egress_policies`)
	if err != nil {
		return nil, fmt.Errorf("store: egress specs: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, spec string
		if err := rows.Scan(&id, &spec); err != nil {
			return nil, fmt.Errorf("store: egress specs: %w", err)
		}
		out[id] = spec
	}
	return out, rows.Err()
}
