package runc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/ocicli"
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// Start writes the bundle (<BundleDir>/<id>/config.json), runs `runc run -d` with PID 1's
// stdout and stderr appended to spec.LogPath (empty: discarded) and stdin /dev/null, and
// returns the running state. An existing container with the ID gives errdefs.ErrAlreadyExists
// and leaves it untouched; any other failure removes everything Start made (container, cgroup,
// bundle) and its error carries runc's message.
func (r *Runtime) Start(ctx context.Context, spec runtime.Spec) (runtime.State, error) {
	if err := ocispec.CheckSpec(spec); err != nil {
		return runtime.State{}, err
	}
	oci, err := r.BuildSpec(spec)
	if err != nil {
		return runtime.State{}, err
	}
	// runc keeps each container's state in <root>/<id>; its presence means the ID is taken.
	// (A stat instead of `runc state` saves a runc process on the create path.)
	if _, err := os.Stat(filepath.Join(r.cli.Root(), spec.ID)); err == nil {
		return runtime.State{}, fmt.Errorf("runc start %s: %w", spec.ID, errdefs.ErrAlreadyExists)
	} else if !errors.Is(err, os.ErrNotExist) {
		return runtime.State{}, fmt.Errorf("runc start %s: %w", spec.ID, err)
	}
	var how launch
	if spec.IDMap.Enabled() {
		// A namespace owned by the range's root, not one runc (root) would make: the
		// kernel's per-user limits of the sandbox are then its own (idmap.ContainerUserNS).
		// runc joins it by a path to this process's descriptor while it starts the
		// container; afterwards the container's processes keep it alive, so the file is
		// closed when Start returns and a restarted hutchd needs nothing of it.
		ns, err := spec.IDMap.ContainerUserNS(r.cli.Binary())
		if errors.Is(err, os.ErrPermission) {
			// The host's setup, not the request: the range's root may not run the binary.
			return runtime.State{}, errdefs.Wrap(errdefs.CodeUnavailable, err, "runc start "+spec.ID)
		} else if err != nil {
			return runtime.State{}, fmt.Errorf("runc start %s: %w", spec.ID, err)
		}
		defer ns.Close()
		if how.netns, err = ocispec.JoinUserNS(oci, fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), ns.Fd())); err != nil {
			return runtime.State{}, err
		}
		how.rlimits, oci.Process.Rlimits = oci.Process.Rlimits, nil
	}
	bundle, err := r.writeBundle(spec.ID, oci)
	if err != nil {
		return runtime.State{}, err
	}
	started := time.Now()
	st, err := r.start(ctx, spec, bundle, how)
	if err != nil {
		r.cli.CleanUpFailed(ctx, "start", spec.ID, err)
		return runtime.State{}, err
	}
	r.log.Info("container started", "sandbox_id", spec.ID, "pid", st.Pid, "took", time.Since(started).Round(time.Microsecond), "limits", ocispec.Describe(spec))
	return st, nil
}

func (r *Runtime) writeBundle(id string, oci any) (string, error) {
	bundle := r.bundle(id)
	if err := ocispec.WriteBundle(bundle, oci); err != nil {
		return "", fmt.Errorf("runc: %w", err)
	}
	return bundle, nil
}

// start runs `runc run --detach` as how says. runc's --log keeps a copy of its own errors,
// in JSON to classify them.
func (r *Runtime) start(ctx context.Context, spec runtime.Spec, bundle string, how launch) (runtime.State, error) {
	l := ocicli.Launch{
		Op: "start", Log: filepath.Join(bundle, "runc-start.log"), LogFlags: []string{"--log-format", "json"},
		Args: []string{"run", "--detach"}, ExtraFiles: spec.ExtraFiles, Exec: how.run, ErrorLines: errorLines, RemoveLog: true,
	}
	if n := len(spec.ExtraFiles); n > 0 {
		l.Extra = []string{"--preserve-fds", strconv.Itoa(n)}
	}
	return r.cli.StartDetached(ctx, spec, l)
}

// errorLines keeps the error-level lines of a runc JSON log.
func errorLines(log string) string {
	var keep []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `"level":"error"`) || strings.Contains(l, `"level":"fatal"`) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// State reports the container's state; an unknown ID gives errdefs.ErrNotFound.
func (r *Runtime) State(ctx context.Context, id string) (runtime.State, error) {
	return r.cli.State(ctx, id)
}

// List reports every container in runc's state directory, running or not, in runc's order.
func (r *Runtime) List(ctx context.Context) ([]runtime.State, error) { return r.cli.List(ctx) }

// Kill sends sig to PID 1 (all=false) or to every process of the container (all=true). An
// unknown ID gives errdefs.ErrNotFound; a container that is not running gives
// errdefs.ErrFailedPrecondition.
func (r *Runtime) Kill(ctx context.Context, id string, sig syscall.Signal, all bool) error {
	return r.cli.Kill(ctx, id, sig, all)
}

// Delete removes the container (runc delete, with --force when force is set) and its bundle.
// Without force, a running container gives errdefs.ErrFailedPrecondition. An unknown ID is not
// an error (leftover bundles and cgroups are still removed). When Delete returns nil, no
// process of the container remains and its cgroup directories are gone: runc may fail to
// remove a cgroup whose last processes are still exiting, and a forced delete that failed so
// (errdefs.ErrInternal) sweeps the cgroups and deletes again (ocicli.Driver.Delete).
func (r *Runtime) Delete(ctx context.Context, id string, force bool) error {
	return r.cli.Delete(ctx, id, force)
}

// SweepCgroups removes the cgroups below the parent whose container keep does not hold
// (runtime.CgroupSweeper): those a container left when hutchd or the host died around its
// delete.
func (r *Runtime) SweepCgroups(ctx context.Context, keep func(id string) bool) ([]string, error) {
	return r.cli.SweepCgroups(ctx, keep)
}

// CgroupDirs returns the host cgroup directories a container with this ID uses (whether or not
// they exist): /sys/fs/cgroup/hutch/<id> on v2, /sys/fs/cgroup/<hierarchy>/hutch/<id> on v1.
func (r *Runtime) CgroupDirs(id string) []string { return r.cli.CgroupDirs(id) }
