package ocicli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// stateJSON is the subset of `state` / `list --format json` output we use.
type stateJSON struct {
	ID     string `json:"id"`
	Pid    int    `json:"pid"`
	Status string `json:"status"`
}

func (d *Driver) state(s stateJSON) runtime.State {
	st := runtime.State{ID: strings.TrimSuffix(s.ID, d.idSuffix), Status: runtime.Status(s.Status), Pid: s.Pid}
	if st.Status == runtime.StatusStopped {
		st.Pid = 0
	}
	return st
}

// Launch is how StartDetached starts a container.
type Launch struct {
	// Op names the launch in errors ("start", "restore").
	Op string
	// Log is the file the binary writes its own log to (--log): in detached mode the
	// container inherits the binary's stdio, so its errors would land in the container log
	// only. LogFlags follow it ("--log-format json").
	Log      string
	LogFlags []string
	// Args are the subcommand and its flags before --bundle ("run", "--detach").
	Args []string
	// Extra are flags after --pid-file ("--preserve-fds N").
	Extra []string
	// ExtraFiles are inherited by the binary, for PID 1 (with --preserve-fds).
	ExtraFiles []*os.File
	// Exec runs the command to its end; nil: cmd.Run.
	Exec func(cmd *exec.Cmd) error
	// ErrorLines keeps the lines of the failure in the text of Log.
	ErrorLines func(log string) string
	// RemoveLog removes Log after a launch that worked.
	RemoveLog bool
}

// StartDetached runs the binary as l says for spec's container, whose bundle is written, with
// PID 1's stdio (OpenStdio), and returns the running state: the PID from the pid file, or from
// State when the file cannot be read.
func (d *Driver) StartDetached(ctx context.Context, spec runtime.Spec, l Launch) (runtime.State, error) {
	stdin, out, err := d.OpenStdio(spec.LogPath)
	if err != nil {
		return runtime.State{}, err
	}
	defer stdin.Close()
	defer out.Close()
	bundle := d.Bundle(spec.ID)
	pidFile := filepath.Join(bundle, "pid")
	args := append([]string{"--log", l.Log}, l.LogFlags...)
	args = append(args, l.Args...)
	args = append(args, "--bundle", bundle, "--pid-file", pidFile)
	args = append(args, l.Extra...)
	cmd := d.Command(ctx, append(args, d.CLIID(spec.ID))...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, out, out
	cmd.ExtraFiles = l.ExtraFiles
	run := l.Exec
	if run == nil {
		run = (*exec.Cmd).Run
	}
	if err := run(cmd); err != nil {
		if ctx.Err() != nil {
			return runtime.State{}, d.Cancelled(ctx, l.Op, spec.ID)
		}
		logText, _ := os.ReadFile(l.Log)
		return runtime.State{}, d.Error(l.Op, spec.ID, err, l.ErrorLines(string(logText)))
	}
	if l.RemoveLog {
		_ = os.Remove(l.Log)
	}
	// A detached run returns once PID 1 runs and has written its PID; reading the pid file
	// saves a `state` process on the create path.
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return d.State(ctx, spec.ID)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return d.State(ctx, spec.ID)
	}
	return runtime.State{ID: spec.ID, Status: runtime.StatusRunning, Pid: pid}, nil
}

// CleanUpFailed removes what a failed op (a start) of container id left (Delete with force),
// with a fresh context: ctx may be the reason it failed. err is the failure, logged.
func (d *Driver) CleanUpFailed(ctx context.Context, op, id string, err error) {
	d.log.Warn("container "+op+" failed", "sandbox_id", id, "err", err)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if derr := d.Delete(cctx, id, true); derr != nil {
		d.log.Error("cleanup after failed "+op, "sandbox_id", id, "err", derr)
	}
}

// State reports the container's state; an unknown ID gives errdefs.ErrNotFound.
func (d *Driver) State(ctx context.Context, id string) (runtime.State, error) {
	if err := ocispec.CheckID(id); err != nil {
		return runtime.State{}, err
	}
	out, err := d.Run(ctx, "state", id, "state", d.CLIID(id))
	if err != nil {
		return runtime.State{}, err
	}
	var s stateJSON
	if err := json.Unmarshal(out, &s); err != nil {
		return runtime.State{}, fmt.Errorf("%s state %s: decode: %w", d.name, id, err)
	}
	return d.state(s), nil
}

// List reports every container in the state directory, running or not, in the binary's order.
func (d *Driver) List(ctx context.Context) ([]runtime.State, error) {
	out, err := d.Run(ctx, "list", "", "list", "--format", "json")
	if err != nil {
		return nil, err
	}
	var all []stateJSON
	if err := json.Unmarshal(out, &all); err != nil {
		return nil, fmt.Errorf("%s list: decode: %w", d.name, err)
	}
	states := make([]runtime.State, 0, len(all))
	for _, s := range all {
		states = append(states, d.state(s))
	}
	return states, nil
}

// Kill sends sig to PID 1 (all=false) or to every process of the container (all=true). An
// unknown ID gives errdefs.ErrNotFound; a container that is not running gives
// errdefs.ErrFailedPrecondition.
func (d *Driver) Kill(ctx context.Context, id string, sig syscall.Signal, all bool) error {
	if err := ocispec.CheckID(id); err != nil {
		return err
	}
	args := []string{"kill"}
	if all {
		args = append(args, "--all")
	}
	args = append(args, d.CLIID(id), strconv.Itoa(int(sig)))
	_, err := d.Run(ctx, "kill", id, args...)
	return err
}

// Delete removes the container (`delete`, with --force when force is set) and its bundle.
// Without force, a running container gives errdefs.ErrFailedPrecondition (as the binary
// refuses). An unknown ID is not an error (leftover bundles and cgroups are still removed).
// When Delete returns nil, no process of the container remains and its cgroup directories are
// gone: any left behind by the binary are killed and removed here.
func (d *Driver) Delete(ctx context.Context, id string, force bool) error {
	if err := ocispec.CheckID(id); err != nil {
		return err
	}
	args := []string{"delete"}
	if force {
		args = append(args, "--force")
	}
	args = append(args, d.CLIID(id))
	if _, err := d.Run(ctx, "delete", id, args...); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		if !force || !d.retry(err) {
			return err
		}
		// The binary may fail to remove a cgroup whose last processes are still exiting, or
		// a container whose processes died under it; the sweep kills what is left and
		// removes the cgroups, then a second delete removes the binary's state.
		d.log.Warn(d.name+" delete failed; sweeping cgroups", "sandbox_id", id, "err", err)
		if serr := d.sweepCgroups(ctx, id); serr != nil {
			return errors.Join(err, serr)
		}
		if _, err := d.Run(ctx, "delete", id, args...); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
	}
	if err := d.sweepCgroups(ctx, id); err != nil {
		return err
	}
	if err := os.RemoveAll(d.Bundle(id)); err != nil {
		return fmt.Errorf("%s delete %s: remove bundle: %w", d.name, id, err)
	}
	d.log.Info("container deleted", "sandbox_id", id, "force", force)
	return nil
}

// sweepCgroups kills whatever is left in the container's cgroups and removes them.
func (d *Driver) sweepCgroups(ctx context.Context, id string) error {
	if err := d.spec.SweepCgroups(ctx, id); err != nil {
		return fmt.Errorf("%s delete %s: %w", d.name, id, err)
	}
	return nil
}

// SweepCgroups removes the cgroups below the parent whose container keep does not hold
// (runtime.CgroupSweeper): those a container left when hutchd or the host died around its
// delete.
func (d *Driver) SweepCgroups(ctx context.Context, keep func(id string) bool) ([]string, error) {
	return d.spec.SweepStrayCgroups(ctx, keep)
}

// CgroupDirs returns the host cgroup directories a container with this ID uses (whether or not
// they exist): <root>/<parent>/<id> on v2, <root>/<hierarchy>/<parent>/<id> on v1.
func (d *Driver) CgroupDirs(id string) []string { return d.spec.CgroupDirs(id) }
