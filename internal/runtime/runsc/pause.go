package runsc

import (
	"context"

	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// Pause stops every task of the container in the Sentry (`runsc pause`); its memory and open
// files stay. Unlike the cgroup freezer it needs no CPU time from the frozen tasks, only from
// the Sentry, under the container's CPU quota. It runs to the end whatever ctx does
// and waits for a memory guard's pause (guard.Supervisor.Pause). An unknown ID gives
// errdefs.ErrNotFound; a container that is not running gives errdefs.ErrFailedPrecondition.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	if err := ocispec.CheckID(id); err != nil {
		return err
	}
	return r.guard.Pause(ctx, id)
}

// Resume restarts a paused container's tasks (`runsc resume`), to the end whatever ctx does,
// as Pause. An unknown ID gives
// errdefs.ErrNotFound; a container that is not paused gives errdefs.ErrFailedPrecondition.
func (r *Runtime) Resume(ctx context.Context, id string) error {
	if err := ocispec.CheckID(id); err != nil {
		return err
	}
	return r.guard.Resume(ctx, id)
}
