package runc

import (
	"context"
	"encoding/json"
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
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// stateJSON is the subset of `runc state` / `runc list --format json` output we use.
type stateJSON struct {
	ID     string `json:"id"`
	Pid    int    `json:"pid"`
	Status string `json:"status"`
}

func (s stateJSON) state() runtime.State {
	st := runtime.State{ID: s.ID, Status: runtime.Status(s.Status), Pid: s.Pid}
	if st.Status == runtime.StatusStopped {
		st.Pid = 0
	}
	return st
}

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
	if _, err := os.Stat(filepath.Join(r.root, spec.ID)); err == nil {
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
		ns, err := spec.IDMap.ContainerUserNS(r.binary)
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
		r.log.Warn("container start failed", "sandbox_id", spec.ID, "err", err)
		// Clean up with a fresh context: ctx may be the reason we failed.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := r.Delete(cctx, spec.ID, true); derr != nil {
			r.log.Error("cleanup after failed start", "sandbox_id", spec.ID, "err", derr)
		}
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

// openStdio opens the files PID 1 inherits: stdin /dev/null, stdout+stderr the log (append).
func openStdio(logPath string) (stdin, out *os.File, err error) {
	stdin, err = os.Open(os.DevNull)
	if err != nil {
		return nil, nil, fmt.Errorf("runc: %w", err)
	}
	if logPath == "" {
		out, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	} else {
		out, err = os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	}
	if err != nil {
		stdin.Close()
		return nil, nil, fmt.Errorf("runc: open container log: %w", err)
	}
	return stdin, out, nil
}

// start runs `runc run --detach` as how says.
func (r *Runtime) start(ctx context.Context, spec runtime.Spec, bundle string, how launch) (runtime.State, error) {
	stdin, out, err := openStdio(spec.LogPath)
	if err != nil {
		return runtime.State{}, err
	}
	defer stdin.Close()
	defer out.Close()
	// In detached pass-through mode the container inherits runc's stdio, so runc's own errors
	// would land in the container log only; --log keeps a copy we can classify.
	runcLog := filepath.Join(bundle, "runc-start.log")
	args := []string{"--log", runcLog, "--log-format", "json",
		"run", "--detach", "--bundle", bundle, "--pid-file", filepath.Join(bundle, "pid")}
	if n := len(spec.ExtraFiles); n > 0 {
		args = append(args, "--preserve-fds", strconv.Itoa(n))
	}
	cmd := r.command(ctx, append(args, spec.ID)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, out, out
	cmd.ExtraFiles = spec.ExtraFiles
	if err := how.run(cmd); err != nil {
		if ctx.Err() != nil {
			return runtime.State{}, fmt.Errorf("runc start %s: %w", spec.ID, errors.Join(errdefs.ErrDeadlineExceeded, ctx.Err()))
		}
		logText, _ := os.ReadFile(runcLog)
		return runtime.State{}, runcError("start", spec.ID, err, errorLines(string(logText)))
	}
	_ = os.Remove(runcLog)
	// runc run --detach returns once PID 1 runs and has written its PID; reading the pid file
	// saves a `runc state` process on the create path.
	b, err := os.ReadFile(filepath.Join(bundle, "pid"))
	if err != nil {
		return r.State(ctx, spec.ID)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return r.State(ctx, spec.ID)
	}
	return runtime.State{ID: spec.ID, Status: runtime.StatusRunning, Pid: pid}, nil
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
	if err := checkID(id); err != nil {
		return runtime.State{}, err
	}
	out, err := r.runSimple(ctx, "state", id, "state", id)
	if err != nil {
		return runtime.State{}, err
	}
	var s stateJSON
	if err := json.Unmarshal(out, &s); err != nil {
		return runtime.State{}, fmt.Errorf("runc state %s: decode: %w", id, err)
	}
	return s.state(), nil
}

// List reports every container in runc's state directory, running or not, in runc's order.
func (r *Runtime) List(ctx context.Context) ([]runtime.State, error) {
	out, err := r.runSimple(ctx, "list", "", "list", "--format", "json")
	if err != nil {
		return nil, err
	}
	var all []stateJSON
	if err := json.Unmarshal(out, &all); err != nil {
		return nil, fmt.Errorf("runc list: decode: %w", err)
	}
	states := make([]runtime.State, 0, len(all))
	for _, s := range all {
		states = append(states, s.state())
	}
	return states, nil
}

// Kill sends sig to PID 1 (all=false) or to every process of the container (all=true). An
// unknown ID gives errdefs.ErrNotFound; a container that is not running gives
// errdefs.ErrFailedPrecondition.
func (r *Runtime) Kill(ctx context.Context, id string, sig syscall.Signal, all bool) error {
	if err := checkID(id); err != nil {
		return err
	}
	args := []string{"kill"}
	if all {
		args = append(args, "--all")
	}
	args = append(args, id, strconv.Itoa(int(sig)))
	_, err := r.runSimple(ctx, "kill", id, args...)
	return err
}

// Delete removes the container (runc delete, with --force when force is set) and its bundle.
// Without force, a running container gives errdefs.ErrFailedPrecondition. An unknown ID is not
// an error (leftover bundles and cgroups are still removed). When Delete returns nil, no
// process of the container remains and its cgroup directories are gone: any left behind by
// runc are killed and removed here.
func (r *Runtime) Delete(ctx context.Context, id string, force bool) error {
	if err := checkID(id); err != nil {
		return err
	}
	args := []string{"delete"}
	if force {
		args = append(args, "--force")
	}
	args = append(args, id)
	if _, err := r.runSimple(ctx, "delete", id, args...); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		if !force || !errors.Is(err, errdefs.ErrInternal) {
			return err
		}
		// runc may fail to remove a cgroup whose last processes are still exiting; the sweep
		// below finishes the job, then runc's state is removed by a second delete.
		r.log.Warn("runc delete failed; sweeping cgroups", "sandbox_id", id, "err", err)
		if serr := r.sweepCgroups(ctx, id); serr != nil {
			return errors.Join(err, serr)
		}
		if _, err := r.runSimple(ctx, "delete", id, args...); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
	}
	if err := r.sweepCgroups(ctx, id); err != nil {
		return err
	}
	if err := os.RemoveAll(r.bundle(id)); err != nil {
		return fmt.Errorf("runc delete %s: remove bundle: %w", id, err)
	}
	r.log.Info("container deleted", "sandbox_id", id, "force", force)
	return nil
}

// SweepCgroups removes the cgroups below the parent whose container keep does not hold
// (runtime.CgroupSweeper): those a container left when hutchd or the host died around its
// delete.
func (r *Runtime) SweepCgroups(ctx context.Context, keep func(id string) bool) ([]string, error) {
	return r.spec.SweepStrayCgroups(ctx, keep)
}

// CgroupDirs returns the host cgroup directories a container with this ID uses (whether or not
// they exist): /sys/fs/cgroup/hutch/<id> on v2, /sys/fs/cgroup/<hierarchy>/hutch/<id> on v1.
func (r *Runtime) CgroupDirs(id string) []string { return r.spec.CgroupDirs(id) }

// sweepCgroups kills whatever is left in the container's cgroups and removes them.
func (r *Runtime) sweepCgroups(ctx context.Context, id string) error {
	if err := r.spec.SweepCgroups(ctx, id); err != nil {
		return fmt.Errorf("runc delete %s: %w", id, err)
	}
	return nil
}
