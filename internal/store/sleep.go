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
