package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/store"
)

var allStatuses = []Status{StatusCreating, StatusStarting, StatusRunning, StatusStopping, StatusSleeping, StatusStopped, StatusError}

// statusManager is a Manager with only what transition uses: a real store.
func statusManager(t *testing.T) *Manager {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &Manager{store: st, log: slog.New(slog.DiscardHandler)}
}

// TestLifecycleMovesAllowed walks the moves each lifecycle operation makes, as the code makes
// them, through transition on a real store: every one must be allowed.
func TestLifecycleMovesAllowed(t *testing.T) {
	tests := []struct {
		name  string
		from  Status
		steps []Status
	}{
		{"create and start", StatusCreating, []Status{StatusRunning}},
		{"first start fails", StatusCreating, []Status{StatusError}},
		{"wake", StatusSleeping, []Status{StatusStarting, StatusRunning}},
		{"start a stopped sandbox", StatusStopped, []Status{StatusStarting, StatusRunning}},
		{"retry after an error", StatusError, []Status{StatusStarting, StatusRunning}},
		{"start fails", StatusStopped, []Status{StatusStarting, StatusError}},
		{"start a running record without its instance", StatusRunning, []Status{StatusStarting, StatusRunning}},
		{"start a stuck stopping record", StatusStopping, []Status{StatusStarting, StatusRunning}},
		{"stop", StatusRunning, []Status{StatusStopping, StatusStopped}},
		{"stop fails", StatusRunning, []Status{StatusStopping, StatusError}},
		{"stop a stopped sandbox", StatusStopped, []Status{StatusStopped}},
		{"stop a sleeping sandbox", StatusSleeping, []Status{StatusStopped}},
		{"stop a sandbox in error", StatusError, []Status{StatusStopped}},
		{"stop fails on a sleeping sandbox", StatusSleeping, []Status{StatusError}},
		{"stop fails on a stopped sandbox", StatusStopped, []Status{StatusError}},
		{"stop fails again", StatusError, []Status{StatusError}},
		{"stop a creating record", StatusCreating, []Status{StatusStopped}},
		{"sleep", StatusRunning, []Status{StatusStopping, StatusSleeping}},
		{"sleep fails", StatusRunning, []Status{StatusStopping, StatusError}},
		{"finish a sleep of a stuck starting record", StatusStarting, []Status{StatusStopping, StatusSleeping}},
		{"finish a sleep of a stuck stopping record", StatusStopping, []Status{StatusStopping, StatusSleeping}},
		{"reset disk of a running sandbox", StatusRunning, []Status{StatusStopping, StatusStopped, StatusStarting, StatusRunning}},
		{"reset disk of a sleeping sandbox", StatusSleeping, []Status{StatusStopping, StatusStopped}},
		{"reset disk of a stopped sandbox", StatusStopped, []Status{StatusStopping, StatusStopped}},
		{"reset disk of a sandbox in error", StatusError, []Status{StatusStopping, StatusStopped}},
		{"reset disk of a creating record", StatusCreating, []Status{StatusStopping, StatusStopped}},
		{"reset disk fails", StatusSleeping, []Status{StatusStopping, StatusError}},
		{"container lost", StatusRunning, []Status{StatusStopped}},
		{"recover a running sandbox", StatusRunning, []Status{StatusStopped}},
		{"recover a creating record", StatusCreating, []Status{StatusStopped}},
		{"recover a sleep cut short", StatusStopping, []Status{StatusSleeping}},
		{"recover a wake cut short", StatusStarting, []Status{StatusSleeping}},
		{"recover a memory wake that finished", StatusStarting, []Status{StatusRunning}},
	}
	m := statusManager(t)
	ctx := context.Background()
	for i, tt := range tests {
		id := fmt.Sprintf("sb-%d", i)
		if _, err := m.store.Insert(ctx, store.Sandbox{ID: id, Status: string(tt.from)}); err != nil {
			t.Fatal(err)
		}
		for _, to := range tt.steps {
			if err := m.transition(ctx, id, to, "cause"); err != nil {
				t.Errorf("%s: → %s: %v", tt.name, to, err)
				break
			}
			rec, err := m.store.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if statusOf(rec) != to || rec.LastError != "cause" {
				t.Errorf("%s: → %s: record has %q %q", tt.name, to, rec.Status, rec.LastError)
			}
			if to == StatusRunning && rec.StartedAt.IsZero() {
				t.Errorf("%s: running without a start time", tt.name)
			}
		}
	}
}

// TestIllegalMoveRefused tries every move the table does not allow, on a real store: each is
// refused with SANDBOX_INVALID_TRANSITION (naming both states) and leaves the record as it was.
func TestIllegalMoveRefused(t *testing.T) {
	// The moves no operation makes; the table must refuse each.
	illegal := map[[2]Status]bool{}
	for _, from := range allStatuses {
		illegal[[2]Status{from, StatusCreating}] = true
	}
	for _, from := range []Status{StatusRunning, StatusStopping, StatusSleeping, StatusStopped, StatusError} {
		illegal[[2]Status{from, StatusRunning}] = true // running only at the end of a start
	}
	for _, from := range []Status{StatusCreating, StatusRunning, StatusSleeping, StatusStopped, StatusError} {
		illegal[[2]Status{from, StatusSleeping}] = true // sleeping only at the end of a sleep or wake cut short
	}
	illegal[[2]Status{StatusCreating, StatusStarting}] = true
	illegal[[2]Status{StatusStarting, StatusStarting}] = true
	illegal[[2]Status{StatusRunning, StatusError}] = true // a running sandbox is stopped first

	m := statusManager(t)
	ctx := context.Background()
	n := 0
	for _, from := range allStatuses {
		for _, to := range allStatuses {
			if got, want := canMove(from, to), !illegal[[2]Status{from, to}]; got != want {
				t.Errorf("table: %s → %s allowed = %v; want %v", from, to, got, want)
			}
			if !illegal[[2]Status{from, to}] {
				continue
			}
			n++
			id := fmt.Sprintf("sb-%s-%s", from, to)
			if _, err := m.store.Insert(ctx, store.Sandbox{ID: id, Status: string(from), LastError: "kept"}); err != nil {
				t.Fatal(err)
			}
			err := m.transition(ctx, id, to, "")
			if !errdefs.IsCode(err, errdefs.CodeSandboxInvalidTransition) {
				t.Errorf("%s → %s: err = %v; want %s", from, to, err, errdefs.CodeSandboxInvalidTransition)
				continue
			}
			var e *errdefs.Error
			if !errors.As(err, &e) || e.Context["from"] != string(from) || e.Context["to"] != string(to) {
				t.Errorf("%s → %s: error context = %+v", from, to, e)
			}
			rec, err := m.store.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if statusOf(rec) != from || rec.LastError != "kept" || !rec.StartedAt.IsZero() {
				t.Errorf("%s → %s refused but the record changed: %q %q %v", from, to, rec.Status, rec.LastError, rec.StartedAt)
			}
		}
	}
	if n != 20 {
		t.Errorf("%d illegal moves tried; want 20", n)
	}
	if err := m.transition(ctx, "nope", StatusStopped, ""); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Errorf("unknown sandbox: err = %v; want SANDBOX_NOT_FOUND", err)
	}
}
