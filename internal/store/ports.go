package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// Port is one exposed port of a sandbox: the preview URL of Port in sandbox SandboxID routes
// when it carries Token. Rows go away with their sandbox (ON DELETE CASCADE).
type Port struct {
	SandboxID string
	Port      int    // 1–65535 (callers enforce their own range)
	Token     string // unique per sandbox
	Name      string // optional label, "" when none
	CreatedAt time.Time
}

const portColumns = `sandbox_id, port, token, name, created_at`

// InsertPort records p in one transaction and returns the stored row (CreatedAt set to now).
// Errors: the sandbox does not exist → SANDBOX_NOT_FOUND; the port is already exposed →
// PORT_ALREADY_EXPOSED (context: port); another port of the sandbox has p.Token →
// PORT_TOKEN_IN_USE (context: port, the other port). Nothing is written on error.
func (s *Store) InsertPort(ctx context.Context, p Port) (Port, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Port{}, fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback()
	if err := sandboxExists(ctx, tx, p.SandboxID); err != nil {
		return Port{}, err
	}
	if _, err := scanPort(tx.QueryRowContext(ctx, `SELECT `+portColumns+` FROM exposed_ports WHERE sandbox_id = ? AND port = ?`, p.SandboxID, p.Port)); err == nil {
		return Port{}, errdefs.Newf(errdefs.CodePortAlreadyExposed, "port %d of sandbox %q is already exposed", p.Port, p.SandboxID).With("port", p.Port)
	} else if !errors.Is(err, sql.ErrNoRows) {
		return Port{}, err
	}
	other, err := scanPort(tx.QueryRowContext(ctx, `SELECT `+portColumns+` FROM exposed_ports WHERE sandbox_id = ? AND token = ?`, p.SandboxID, p.Token))
	if err == nil {
		return Port{}, errdefs.Newf(errdefs.CodeTokenInUse, "the token already serves port %d of sandbox %q: use another token", other.Port, p.SandboxID).With("port", p.Port).With("otherPort", other.Port)
	} else if !errors.Is(err, sql.ErrNoRows) {
		return Port{}, err
	}
	p.CreatedAt = time.Now().UTC()
	if _, err := tx.ExecContext(ctx, `INSERT INTO exposed_ports (`+portColumns+`) VALUES (?, ?, ?, ?, ?)`,
		p.SandboxID, p.Port, p.Token, p.Name, p.CreatedAt.UnixNano()); err != nil {
		return Port{}, fmt.Errorf("store: insert port %d of %s: %w", p.Port, p.SandboxID, err)
	}
	if err := tx.Commit(); err != nil {
		return Port{}, fmt.Errorf("store: commit: %w", err)
	}
	return p, nil
}

// GetPort returns the exposed port of a sandbox. Not exposed (or no such sandbox) →
// PORT_NOT_EXPOSED (context: port).
func (s *Store) GetPort(ctx context.Context, sandboxID string, port int) (Port, error) {
	p, err := scanPort(s.db.QueryRowContext(ctx, `SELECT `+portColumns+` FROM exposed_ports WHERE sandbox_id = ? AND port = ?`, sandboxID, port))
	if errors.Is(err, sql.ErrNoRows) {
		return Port{}, portNotExposed(sandboxID, port)
	}
	return p, err
}

// PortByToken returns the port of a sandbox that token serves. None → PORT_NOT_EXPOSED.
func (s *Store) PortByToken(ctx context.Context, sandboxID, token string) (Port, error) {
	p, err := scanPort(s.db.QueryRowContext(ctx, `SELECT `+portColumns+` FROM exposed_ports WHERE sandbox_id = ? AND token = ?`, sandboxID, token))
	if errors.Is(err, sql.ErrNoRows) {
		return Port{}, errdefs.Newf(errdefs.CodePortNotExposed, "no port of sandbox %q has that token", sandboxID)
	}
	return p, err
}

// ListPorts returns a sandbox's exposed ports ordered by port. Unknown sandbox →
// SANDBOX_NOT_FOUND; a sandbox with none gives an empty, non-nil slice.
func (s *Store) ListPorts(ctx context.Context, sandboxID string) ([]Port, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback()
	if err := sandboxExists(ctx, tx, sandboxID); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+portColumns+` FROM exposed_ports WHERE sandbox_id = ? ORDER BY port`, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("store: list ports of %s: %w", sandboxID, err)
	}
	defer rows.Close()
	out := []Port{}
	for rows.Next() {
		p, err := scanPort(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list ports of %s: %w", sandboxID, err)
	}
	return out, nil
}

// DeletePort removes an exposed port. Not exposed → PORT_NOT_EXPOSED (context: port).
func (s *Store) DeletePort(ctx context.Context, sandboxID string, port int) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM exposed_ports WHERE sandbox_id = ? AND port = ?`, sandboxID, port)
	if err != nil {
		return fmt.Errorf("store: delete port %d of %s: %w", port, sandboxID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return portNotExposed(sandboxID, port)
	}
	return nil
}

func portNotExposed(sandboxID string, port int) error {
	return errdefs.Newf(errdefs.CodePortNotExposed, "port %d of sandbox %q is not exposed", port, sandboxID).With("port", port)
}

func sandboxExists(ctx context.Context, tx *sql.Tx, id string) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sandboxes WHERE id = ?`, id).Scan(&n); err != nil {
		return fmt.Errorf("store: lookup %s: %w", id, err)
	}
	if n == 0 {
		return errdefs.Newf(errdefs.CodeSandboxNotFound, "sandbox %q not found", id).With("id", id)
	}
	return nil
}

func scanPort(r scanner) (Port, error) {
	var (
		p       Port
		created int64
	)
	if err := r.Scan(&p.SandboxID, &p.Port, &p.Token, &p.Name, &created); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Port{}, err
		}
		return Port{}, fmt.Errorf("store: scan port: %w", err)
	}
	p.CreatedAt = fromNano(created)
	return p, nil
}
