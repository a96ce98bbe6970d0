package runsc

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

// stateJSON is the subset of `runsc state` / `runsc list --format json` output we use.
type stateJSON struct {
	ID     string `json:"id"`
	Pid    int    `json:"pid"`
	Status string `json:"status"`
}

func (s stateJSON) state() runtime.State {
	st := runtime.State{ID: sandboxID(s.ID), Status: runtime.Status(s.Status), Pid: s.Pid}
	if st.Status == runtime.StatusStopped {
		st.Pid = 0
	}
	return st
}

// Start writes the bundle (<BundleDir>/<id>/config.json), runs `runsc run --detach` with the
// container's stdout and stderr appended to spec.LogPath (empty: discarded) and stdin
// /dev/null, and returns the running state; State.Pid is the host PID of the sandbox (the
// Sentry). spec.ExtraFiles must be empty (errdefs.ErrInvalidArgument): see
// runtime.ExtraFileRefuser. An existing container with the ID gives errdefs.ErrAlreadyExists and
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
	if err := r.initGuardDir(spec.ID, spec.Resources.MemoryBytes); err != nil {
		return runtime.State{}, fmt.Errorf("runsc: memory guard: %w", err)
	}
	started := time.Now()
	st, err := r.run(ctx, spec, bundle, op, image)
	if err != nil {
		r.log.Warn("container "+op+" failed", "sandbox_id", spec.ID, "err", err)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := r.Delete(cctx, spec.ID, true); derr != nil {
			r.log.Error("cleanup after failed "+op, "sandbox_id", spec.ID, "err", derr)
		}
		return runtime.State{}, err
	}
	r.log.Info("container "+map[string]string{"start": "started", "restore": "restored"}[op], "sandbox_id", spec.ID, "pid", st.Pid, "image", image, "took", time.Since(started).Round(time.Microsecond), "limits", ocispec.Describe(spec))
	r.startGuard(spec.ID)
	return st, nil
}

// openStdio opens the files the container inherits: stdin /dev/null, stdout+stderr the log.
func openStdio(logPath string) (stdin, out *os.File, err error) {
	stdin, err = os.Open(os.DevNull)
	if err != nil {
		return nil, nil, fmt.Errorf("runsc: %w", err)
	}
	if logPath == "" {
		out, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	} else {
		out, err = os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	}
	if err != nil {
		stdin.Close()
		return nil, nil, fmt.Errorf("runsc: open container log: %w", err)
	}
	return stdin, out, nil
}

// run runs `runsc run` (op "start") or `runsc restore --image-path image` (op "restore")
// detached, with the container's stdio, and returns the running state.
func (r *Runtime) run(ctx context.Context, spec runtime.Spec, bundle, op, image string) (runtime.State, error) {
	stdin, out, err := openStdio(spec.LogPath)
	if err != nil {
		return runtime.State{}, err
	}
	defer stdin.Close()
	defer out.Close()
	// runsc's stdio is donated to the container, so its own errors would land in the container
	// log only; --log keeps a copy we can classify.
	runscLog := filepath.Join(bundle, "runsc-"+op+".log")
	pidFile := filepath.Join(bundle, "pid")
	args := []string{"--log", runscLog, "run", "--detach"}
	if image != "" {
		args = []string{"--log", runscLog, "restore", "--detach", "--image-path", image}
	}
	cmd := r.command(ctx, append(args, "--bundle", bundle, "--pid-file", pidFile, runscID(spec.ID))...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, out, out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return runtime.State{}, fmt.Errorf("runsc %s %s: %w", op, spec.ID, errors.Join(errdefs.ErrDeadlineExceeded, ctx.Err()))
		}
		logText, _ := os.ReadFile(runscLog)
		return runtime.State{}, runscError(op, spec.ID, err, errorLines(string(logText)))
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return r.State(ctx, spec.ID)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return r.State(ctx, spec.ID)
	}
	return runtime.State{ID: spec.ID, Status: runtime.StatusRunning, Pid: pid}, nil
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
	if err := ocispec.CheckID(id); err != nil {
		return runtime.State{}, err
	}
	out, err := r.runSimple(ctx, "state", id, "state", runscID(id))
	if err != nil {
		return runtime.State{}, err
	}
	var s stateJSON
	if err := json.Unmarshal(out, &s); err != nil {
		return runtime.State{}, fmt.Errorf("runsc state %s: decode: %w", id, err)
	}
	return s.state(), nil
}

// List reports every container in runsc's state directory, running or not.
func (r *Runtime) List(ctx context.Context) ([]runtime.State, error) {
	out, err := r.runSimple(ctx, "list", "", "list", "--format", "json")
	if err != nil {
		return nil, err
	}
	var all []stateJSON
	if err := json.Unmarshal(out, &all); err != nil {
		return nil, fmt.Errorf("runsc list: decode: %w", err)
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
	if err := ocispec.CheckID(id); err != nil {
		return err
	}
	args := []string{"kill"}
	if all {
		args = append(args, "--all")
	}
	args = append(args, runscID(id), strconv.Itoa(int(sig)))
	_, err := r.runSimple(ctx, "kill", id, args...)
	return err
}

// Delete removes the container (`runsc delete`, with --force when force is set) and its
// bundle. Without force, a running container gives errdefs.ErrFailedPrecondition. An unknown
// ID is not an error (leftover bundles and cgroups are still removed). When Delete returns nil,
// no process of the container (Sentry, gofer, their children) remains and its cgroup
// directories are gone.
func (r *Runtime) Delete(ctx context.Context, id string, force bool) error {
	if err := ocispec.CheckID(id); err != nil {
		return err
	}
	if !force {
		if st, err := r.State(ctx, id); err == nil && st.Status != runtime.StatusStopped && st.Status != runtime.StatusCreated {
			return fmt.Errorf("runsc delete %s: container is %s: %w", id, st.Status, errdefs.ErrFailedPrecondition)
		}
	}
	r.stopGuard(id)
	args := []string{"delete"}
	if force {
		args = append(args, "--force")
	}
	args = append(args, runscID(id))
	if _, err := r.runSimple(ctx, "delete", id, args...); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		if !force {
			return err
		}
		// A sandbox whose processes died under runsc (killed from outside) can make delete
		// fail; the sweep kills what is left, then a second delete removes the state.
		r.log.Warn("runsc delete failed; sweeping cgroups", "sandbox_id", id, "err", err)
		if serr := r.spec.SweepCgroups(ctx, id); serr != nil {
			return errors.Join(err, serr)
		}
		if _, err := r.runSimple(ctx, "delete", id, args...); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
	}
	if err := r.spec.SweepCgroups(ctx, id); err != nil {
		return fmt.Errorf("runsc delete %s: %w", id, err)
	}
	if err := os.RemoveAll(r.bundle(id)); err != nil {
		return fmt.Errorf("runsc delete %s: remove bundle: %w", id, err)
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
// they exist).
func (r *Runtime) CgroupDirs(id string) []string { return r.spec.CgroupDirs(id) }
