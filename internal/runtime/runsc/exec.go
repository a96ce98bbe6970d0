package runsc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/ocicli"
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// Exec runs args in the running container with `runsc exec` (PID 1's environment and working
// directory from the bundle), stdin /dev/null, and waits for it. Writes to stdout and stderr
// are serialised, so they may be the same writer. It returns the process's exit code; a
// process killed by signal N gives 128+N. err is non-nil only when the process could not be
// run (unknown container gives errdefs.ErrNotFound, one not running
// errdefs.ErrFailedPrecondition) or ctx ended. stdout and stderr may be nil
// (discarded). Meant for tests and benchmarks; sandboxes run their commands through hutch-init.
func (r *Runtime) Exec(ctx context.Context, id string, args []string, stdout, stderr io.Writer) (int, error) {
	if err := ocispec.CheckID(id); err != nil {
		return -1, err
	}
	if len(args) == 0 {
		return -1, errdefs.Newf(errdefs.CodeInvalidArgument, "runsc exec %s: empty args", id)
	}
	// runsc exec fails before running anything on an unknown or stopped container; asking
	// first gives those a classified error instead of an exit code.
	if st, err := r.State(ctx, id); err != nil {
		return -1, err
	} else if st.Status != runtime.StatusRunning {
		return -1, fmt.Errorf("runsc exec %s: container is %s: %w", id, st.Status, errdefs.ErrFailedPrecondition)
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	var mu sync.Mutex
	cmd := r.cli.Command(ctx, append([]string{"exec", r.cli.CLIID(id)}, args...)...)
	cmd.Stdout = &ocicli.LockedWriter{Mu: &mu, W: stdout}
	cmd.Stderr = &ocicli.LockedWriter{Mu: &mu, W: stderr}
	err := cmd.Run()
	if err == nil {
		return 0, nil
	}
	if ctx.Err() != nil {
		return -1, fmt.Errorf("runsc exec %s: %w", id, errors.Join(errdefs.ErrDeadlineExceeded, ctx.Err()))
	}
	code := ocicli.ExitCode(err)
	if code == -1 {
		return -1, r.cli.Error("exec", id, err, "")
	}
	return code, nil
}
