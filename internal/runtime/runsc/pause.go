package runsc

import (
	"context"

	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// Pause stops every task of the container in the Sentry (`runsc pause`); its memory and open
// files stay. Unlike the cgroup freezer it needs no CPU time from the frozen tasks, so a
// throttled container pauses as fast as an idle one. An unknown ID gives errdefs.ErrNotFound;
// a container that is not running gives errdefs.ErrFailedPrecondition.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	if err := ocispec.CheckID(id); err != nil {
		return err
	}
	_, err := r.runSimple(ctx, "pause", id, "pause", runscID(id))
	return err
}

// Resume restarts a paused container's tasks (`runsc resume`). An unknown ID gives
// errdefs.ErrNotFound; a container that is not paused gives errdefs.ErrFailedPrecondition.
func (r *Runtime) Resume(ctx context.Context, id string) error {
	if err := ocispec.CheckID(id); err != nil {
		return err
	}
	_, err := r.runSimple(ctx, "resume", id, "resume", runscID(id))
	return err
}
