package sandbox

import (
	"context"
	"slices"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/store"
)

// Status is a sandbox's lifecycle state. The store records it as text (store.Sandbox.Status);
// only transition writes it, and only along the moves of the table below.
type Status string

// Sandbox states. creating is the state a new record is inserted in; starting and stopping are
// recorded while the move runs, so list and status show it; error records a failed start, stop
// or sleep (the next request starts the sandbox again). A destroyed sandbox has no record.
const (
	StatusCreating Status = "creating"
	StatusStarting Status = "starting"
	StatusRunning  Status = "running"
	StatusStopping Status = "stopping"
	StatusSleeping Status = "sleeping"
	StatusStopped  Status = "stopped"
	StatusError    Status = "error"
)

// statusOf is rec's recorded status.
func statusOf(rec store.Sandbox) Status { return Status(rec.Status) }

// moves is the allowed-moves table: moves[from] lists the states a sandbox may move to from
// from. Every row is a step of one operation:
//   - start (ensureLocked): a new sandbox goes creating → running; any other that is not up
//     goes → starting → running. A start that fails records error.
//   - stop (Stop): running → stopping → stopped; stopping anything else not running records
//     stopped again (a stop is idempotent and clears an error). A teardown that fails records
//     error, from whatever state the stop found.
//   - sleep (putToSleep): running → stopping → sleeping; also from a starting or stopping
//     record whose teardown failed earlier, to finish it. A teardown that fails records error.
//   - reset disk (ResetDisk): any → stopping → stopped, then a start.
//   - container loss (Recheck) and Recover after a crash: running or creating → stopped;
//     stopping or starting (a sleep or wake cut short) → sleeping; a memory wake that finished
//     after the crash, starting → running.
//
// What it refuses: a move back to creating; running from anything but a start in progress
// (creating, starting); sleeping from anything but a sleep or wake in progress (stopping,
// starting); starting on a sandbox already creating or starting; error or sleeping recorded on
// a running sandbox without its stopping first.
var moves = map[Status][]Status{
	StatusCreating: {StatusRunning, StatusError, StatusStopping, StatusStopped},
	StatusStarting: {StatusRunning, StatusError, StatusStopping, StatusStopped, StatusSleeping},
	StatusRunning:  {StatusStarting, StatusStopping, StatusStopped},
	StatusStopping: {StatusStarting, StatusStopping, StatusSleeping, StatusStopped, StatusError},
	StatusSleeping: {StatusStarting, StatusStopping, StatusStopped, StatusError},
	StatusStopped:  {StatusStarting, StatusStopping, StatusStopped, StatusError},
	StatusError:    {StatusStarting, StatusStopping, StatusStopped, StatusError},
}

// allowedFrom is moves inverted: the states from which a sandbox may move to each state.
var allowedFrom = func() map[Status][]string {
	out := map[Status][]string{}
	for _, from := range []Status{StatusCreating, StatusStarting, StatusRunning, StatusStopping, StatusSleeping, StatusStopped, StatusError} {
		for _, to := range moves[from] {
			out[to] = append(out[to], string(from))
		}
	}
	return out
}()

// canMove reports whether the table allows from → to.
func canMove(from, to Status) bool { return slices.Contains(moves[from], to) }

// transition moves sandbox id to status to, recording cause as its last error ("" clears it;
// the cause of a move to error says what failed). The store writes the move only while the
// recorded status is one the table allows it from, in one statement, so the check and the write
// cannot be split by another writer. A move the table refuses is not written: it is logged and
// returned as SANDBOX_INVALID_TRANSITION. Moving to running stamps the start time. Unknown id →
// SANDBOX_NOT_FOUND.
func (m *Manager) transition(ctx context.Context, id string, to Status, cause string) error {
	written, cur, err := m.store.SetStatus(ctx, id, store.StatusChange{
		To: string(to), LastError: cause, From: allowedFrom[to], Started: to == StatusRunning,
	})
	if err != nil {
		return err
	}
	if !written {
		err := errdefs.Newf(errdefs.CodeSandboxInvalidTransition, "sandbox %q cannot move from %s to %s", id, cur, to).
			With("id", id).With("from", cur).With("to", string(to))
		m.log.ErrorContext(ctx, "sandbox status move refused", "sandbox_id", id, "from", cur, "to", string(to), "code", string(errdefs.CodeOf(err)))
		return err
	}
	m.log.DebugContext(ctx, "sandbox status", "sandbox_id", id, "status", string(to))
	return nil
}

// recordFailure moves sandbox id to error with cause, on the failure path of an operation that
// returns its own error: a record that cannot be written is logged, not lost.
func (m *Manager) recordFailure(ctx context.Context, id, cause string) {
	if err := m.transition(ctx, id, StatusError, cause); err != nil {
		m.log.ErrorContext(ctx, "record sandbox failure", "sandbox_id", id, "cause", cause, "err", err)
	}
}
