package runsc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/ocicli"
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// Start writes the bundle (<BundleDir>/<id>/config.json), runs `runsc run --detach` with the
// container's stdout and stderr appended to spec.LogPath (empty: discarded) and stdin
// /dev/null, and returns the running state; State.Pid is the host PID of the sandbox (the
// Sentry). spec.ExtraFiles must be empty (errdefs.ErrInvalidArgument): see
// runtime.Features.RefusesExtraFiles. An existing container with the ID gives errdefs.ErrAlreadyExists and
// leaves it untouched; any other failure removes everything Start made (sandbox, cgroups,
// bundle) and its error carries runsc's message.
func (r *Runtime) Start(ctx context.Context, spec runtime.Spec) (runtime.State, error) {
	return r.launch(ctx, spec, "")
}

// launch runs spec's container: afresh (`runsc run`), or with image (a directory Checkpoint
// wrote) from that image (`runsc restore`). See Start and Restore.
func (r *Runtime) launch(ctx context.Context, spec runtime.Spec, image string) (runtime.State, error) {
	op := "start"
	if image != "" {
		op = "restore"
	}
	if err := ocispec.CheckSpec(spec); err != nil {
		return runtime.State{}, err
	}
	if len(spec.ExtraFiles) > 0 {
		return runtime.State{}, errdefs.Newf(errdefs.CodeInvalidArgument, "runsc: container %s: runsc cannot pass inherited files to PID 1", spec.ID)
	}
	if image != "" {
		if _, err := os.Stat(filepath.Join(image, "checkpoint.img")); err != nil {
			return runtime.State{}, fmt.Errorf("runsc restore %s: no checkpoint image in %s: %w", spec.ID, image, errors.Join(errdefs.ErrNotFound, err))
		}
	}
	oci, err := r.BuildSpec(spec)
	if err != nil {
		return runtime.State{}, err
	}
	// runsc keeps each container's state in <root>/<id>_sandbox:<id>.state (and a lock file);
	// `runsc state` is the reliable test that the ID is taken.
	if _, err := r.State(ctx, spec.ID); err == nil {
		return runtime.State{}, fmt.Errorf("runsc %s %s: %w", op, spec.ID, errdefs.ErrAlreadyExists)
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		return runtime.State{}, err
	}
	bundle := r.bundle(spec.ID)
	if err := ocispec.WriteBundle(bundle, oci); err != nil {
		return runtime.State{}, fmt.Errorf("runsc: %w", err)
	}
	if err := r.guard.Init(spec.ID, spec.Resources.MemoryBytes); err != nil {
		return runtime.State{}, fmt.Errorf("runsc: memory guard: %w", err)
	}
	started := time.Now()
	st, err := r.run(ctx, spec, bundle, op, image)
	if err != nil {
		r.cli.CleanUpFailed(ctx, op, spec.ID, err)
		return runtime.State{}, err
	}
	r.log.Info("container "+map[string]string{"start": "started", "restore": "restored"}[op], "sandbox_id", spec.ID, "pid", st.Pid, "image", image, "took", time.Since(started).Round(time.Microsecond), "limits", ocispec.Describe(spec))
	r.guard.Start(spec.ID)
	return st, nil
}

// run runs `runsc run` (op "start") or `runsc restore --image-path image` (op "restore")
// detached, with the container's stdio, and returns the running state. runsc's --log keeps a
// copy of its own errors (in the bundle: removed with it).
func (r *Runtime) run(ctx context.Context, spec runtime.Spec, bundle, op, image string) (runtime.State, error) {
	l := ocicli.Launch{Op: op, Log: filepath.Join(bundle, "runsc-"+op+".log"), Args: []string{"run", "--detach"}, ErrorLines: errorLines}
	if image != "" {
		l.Args = []string{"restore", "--detach", "--image-path", image}
	}
	return r.cli.StartDetached(ctx, spec, l)
}

// errorLines keeps the messages of a runsc log's error lines: runsc writes the error that ends
// a command as {"msg":"…","level":"error",…}; glog-style warning and error lines (a leading W,
// E or F) are kept too.
func errorLines(log string) string {
	var keep []string
	for _, l := range strings.Split(log, "\n") {
		switch {
		case strings.Contains(l, `"level":"error"`) || strings.Contains(l, `"level":"fatal"`):
			var m struct {
				Msg string `json:"msg"`
			}
			if json.Unmarshal([]byte(l), &m) == nil && m.Msg != "" {
				l = m.Msg
			}
			keep = append(keep, l)
		case len(l) > 0 && strings.ContainsRune("WEF", rune(l[0])):
			if i := strings.Index(l, "] "); i >= 0 {
				l = l[i+2:]
			}
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// State reports the container's state; an unknown ID gives errdefs.ErrNotFound.
func (r *Runtime) State(ctx context.Context, id string) (runtime.State, error) {
	return r.cli.State(ctx, id)
}

// List reports every container in runsc's state directory, running or not.
func (r *Runtime) List(ctx context.Context) ([]runtime.State, error) { return r.cli.List(ctx) }

// Kill sends sig to PID 1 (all=false) or to every process of the container (all=true). An
// unknown ID gives errdefs.ErrNotFound; a container that is not running gives
// errdefs.ErrFailedPrecondition.
func (r *Runtime) Kill(ctx context.Context, id string, sig syscall.Signal, all bool) error {
	return r.cli.Kill(ctx, id, sig, all)
}

// Delete removes the container (`runsc delete`, with --force when force is set) and its
// bundle, after its memory guard stopped. Without force, a running container gives
// errdefs.ErrFailedPrecondition. An unknown ID is not an error (leftover bundles and cgroups
// are still removed). When Delete returns nil, no process of the container (Sentry, gofer,
// their children) remains and its cgroup directories are gone.
func (r *Runtime) Delete(ctx context.Context, id string, force bool) error {
	if err := ocispec.CheckID(id); err != nil {
		return err
	}
	if !force {
		if st, err := r.State(ctx, id); err == nil && st.Status != runtime.StatusStopped && st.Status != runtime.StatusCreated {
			return fmt.Errorf("runsc delete %s: container is %s: %w", id, st.Status, errdefs.ErrFailedPrecondition)
		}
	}
	r.guard.Stop(id)
	return r.cli.Delete(ctx, id, force)
}

// SweepCgroups removes the cgroups below the parent whose container keep does not hold
// (runtime.CgroupSweeper): those a container left when hutchd or the host died around its
// delete.
func (r *Runtime) SweepCgroups(ctx context.Context, keep func(id string) bool) ([]string, error) {
	return r.cli.SweepCgroups(ctx, keep)
}

// CgroupDirs returns the host cgroup directories a container with this ID uses (whether or not
// they exist).
func (r *Runtime) CgroupDirs(id string) []string { return r.cli.CgroupDirs(id) }

// Adopt starts the memory guard of a running container that a restarted hutchd took over
// (runtime.Adopter); Start and Restore start it themselves.
func (r *Runtime) Adopt(id string) { r.guard.Start(id) }
