package runc

import "context"

// Pause freezes every process of the container (`runc pause`: the cgroup freezer, v1 and v2).
// An unknown ID gives errdefs.ErrNotFound; a container that is not running gives
// errdefs.ErrFailedPrecondition.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	_, err := r.runSimple(ctx, "pause", id, "pause", id)
	return err
}

// Resume thaws a paused container (`runc resume`). An unknown ID gives errdefs.ErrNotFound; a
// container that is not paused gives errdefs.ErrFailedPrecondition.
func (r *Runtime) Resume(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	_, err := r.runSimple(ctx, "resume", id, "resume", id)
	return err
}
