package runc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/hutchdev/hutch/errdefs"
)

// Pause freezes every process of the container (`runc pause`: the cgroup freezer, v1 and v2).
// The freezer can only catch a task when it runs, so a container throttled hard by its CPU
// quota (a small instance type with busy processes) can make `runc pause` give up with
// "unable to freeze". Pause then lifts the container's CPU quota (`runc update`), freezes it,
// and puts the quota back while it is frozen; a frozen container uses no CPU, so the quota is
// never exceeded. An unknown ID gives errdefs.ErrNotFound; a container that is not running
// gives errdefs.ErrFailedPrecondition.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	_, err := r.runSimple(ctx, "pause", id, "pause", id)
	if err == nil || !errors.Is(err, errdefs.ErrInternal) {
		return err
	}
	quota, period, ok := r.cpuQuota(id)
	if !ok {
		return err
	}
	r.log.DebugContext(ctx, "freezer could not catch throttled tasks; lifting the CPU quota to freeze", "sandbox_id", id, "err", err)
	if _, uerr := r.runSimple(ctx, "update", id, "update", "--cpu-quota", "-1", id); uerr != nil {
		return errors.Join(err, uerr)
	}
	const attempts = 5
	for i := range attempts {
		if err = r.pauseOnce(ctx, id); err == nil || !errors.Is(err, errdefs.ErrInternal) || i == attempts-1 {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(i+1) * 20 * time.Millisecond):
		}
	}
	// Put the quota back whatever happened; a context that ended must not leave it lifted.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, uerr := r.runSimple(rctx, "update", id, "update", "--cpu-period", strconv.FormatUint(period, 10), "--cpu-quota", strconv.FormatInt(quota, 10), id); uerr != nil {
		r.log.ErrorContext(rctx, "restoring the CPU quota after a freeze failed", "sandbox_id", id, "err", uerr)
		if err == nil {
			_, _ = r.runSimple(rctx, "resume", id, "resume", id)
		}
		return errors.Join(err, fmt.Errorf("restore cpu quota of %s: %w", id, uerr))
	}
	return err
}

func (r *Runtime) pauseOnce(ctx context.Context, id string) error {
	_, err := r.runSimple(ctx, "pause", id, "pause", id)
	return err
}

// cpuQuota reads the CFS quota and period container id was started with from its bundle.
func (r *Runtime) cpuQuota(id string) (quota int64, period uint64, ok bool) {
	b, err := os.ReadFile(filepath.Join(r.bundle(id), "config.json"))
	if err != nil {
		return 0, 0, false
	}
	var s specs.Spec
	if json.Unmarshal(b, &s) != nil || s.Linux == nil || s.Linux.Resources == nil || s.Linux.Resources.CPU == nil {
		return 0, 0, false
	}
	c := s.Linux.Resources.CPU
	if c.Quota == nil || *c.Quota <= 0 || c.Period == nil {
		return 0, 0, false
	}
	return *c.Quota, *c.Period, true
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

// Adopt puts container id's CPU quota back to the one it was started with (its bundle's), for
// a restarted hutchd that takes the container over (runtime.Adopter): a hutchd killed inside
// Pause, between lifting the quota and restoring it, would otherwise leave the container
// running with no quota at all. Failures are logged; a container without a quota is left be.
func (r *Runtime) Adopt(id string) {
	if checkID(id) != nil {
		return
	}
	quota, period, ok := r.cpuQuota(id)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) //nolint:forbidigo // Adopt takes no ctx; the bound keeps a recovery going
	defer cancel()
	if _, err := r.runSimple(ctx, "update", id, "update", "--cpu-period", strconv.FormatUint(period, 10), "--cpu-quota", strconv.FormatInt(quota, 10), id); err != nil {
		r.log.ErrorContext(ctx, "put back the CPU quota of an adopted container", "sandbox_id", id, "err", err)
	}
}
