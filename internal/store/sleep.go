package store

import (
	"context"
	"fmt"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// SetSleepSettings records sandbox id's idle time before sleeping (> 0, stored in whole
// milliseconds) and its keepAlive flag. Unknown id → SANDBOX_NOT_FOUND.
func (s *Store) SetSleepSettings(ctx context.Context, id string, sleepAfter time.Duration, keepAlive bool) error {
	if sleepAfter <= 0 {
		return errdefs.Newf(errdefs.CodeInvalidArgument, "sleepAfter %s: want a positive duration", sleepAfter)
	}
	res, err := s.db.ExecContext(ctx,
		`UPDATE sandboxes SET sleep_after_ms = ?, keep_alive = ?, updated_at = ? WHERE id = ?`,
		sleepAfter.Milliseconds(), keepAlive, time.Now().UTC().UnixNano(), id)
	if err != nil {
		return fmt.Errorf("store: set sleep settings %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errdefs.Newf(errdefs.CodeSandboxNotFound, "sandbox %q not found", id).With("id", id)
	}
	return nil
}

// SetSnapshotOnSleep records whether every sleep of sandbox id snapshots its disk. Unknown id
// → SANDBOX_NOT_FOUND.
func (s *Store) SetSnapshotOnSleep(ctx context.Context, id string, on bool) error {
	res, err := s.db.ExecContext(ctx,
		`UPDATE sandboxes SET snapshot_on_sleep = ?, updated_at = ? WHERE id = ?`, on, time.Now().UTC().UnixNano(), id)
	if err != nil {
		return fmt.Errorf("store: set snapshotOnSleep %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errdefs.Newf(errdefs.CodeSandboxNotFound, "sandbox %q not found", id).With("id", id)
	}
	return nil
}

// SetSleepSnapshot records the outcome of the snapshot taken at sandbox id's last sleep: the
// snapshot's ID on success (snapErr ""), or snapErr, the failure's text (the last successful
// ID stays). Unknown id → SANDBOX_NOT_FOUND.
func (s *Store) SetSleepSnapshot(ctx context.Context, id, snapID, snapErr string) error {
	q := `UPDATE sandboxes SET last_snapshot = ?, last_snapshot_error = '', updated_at = ? WHERE id = ?`
	arg := snapID
	if snapErr != "" {
		q = `UPDATE sandboxes SET last_snapshot_error = ?, updated_at = ? WHERE id = ?`
		arg = snapErr
	}
	res, err := s.db.ExecContext(ctx, q, arg, time.Now().UTC().UnixNano(), id)
	if err != nil {
		return fmt.Errorf("store: set sleep snapshot %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errdefs.Newf(errdefs.CodeSandboxNotFound, "sandbox %q not found", id).With("id", id)
	}
	return nil
}
