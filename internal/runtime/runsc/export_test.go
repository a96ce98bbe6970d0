package runsc

import (
	"context"
	"errors"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/runtime/runsc/guard"
)

// Exported for the external tests.
var (
	PseudoVersionTime = pseudoVersionTime
)

// StopGuard stops id's memory guard, as a hutchd that exits does.
func (r *Runtime) StopGuard(id string) { r.guard.Stop(id) }

// SetOnGuardKill sets Config.OnGuardKill of a runtime made by New; call it before Start.
func (r *Runtime) SetOnGuardKill(f func(GuardKill)) { r.guard.OnKill = f }

// SignalGroup sends sig to process group pgid of id through the Sentry's control socket.
func (r *Runtime) SignalGroup(ctx context.Context, id string, pgid int, sig unix.Signal) error {
	return r.guard.SignalGroup(ctx, id, pgid, sig)
}

// IsGroupGone reports whether err is SignalGroup's error for a group with no process left.
func IsGroupGone(err error) bool { return errors.Is(err, guard.ErrGroupGone) }

// GroupOf returns the process group of id's first process whose command is cmd (runsc ps),
// or 0. runsc lists the command name only.
func (r *Runtime) GroupOf(ctx context.Context, id, cmd string) (int, error) {
	ps, err := r.guard.Processes(ctx, id)
	for _, p := range ps {
		if p.Cmd == cmd {
			return p.PGID, err
		}
	}
	return 0, err
}

// EscalateWindow is guard.EscalateWindow.
const EscalateWindow = guard.EscalateWindow

// CountProcesses returns how many processes runsc lists in id, zombies included.
func (r *Runtime) CountProcesses(ctx context.Context, id string) (int, error) {
	ps, err := r.guard.Processes(ctx, id)
	return len(ps), err
}

// SetAgentProbe sets Config.AgentProbe of a runtime made by New; call it before Start.
func (r *Runtime) SetAgentProbe(f func(ctx context.Context, id string) error) { r.guard.AgentProbe = f }
