package runc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/ocicli"
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// Exec runs args in the running container with `runc exec` (PID 1's environment, working
// directory, capabilities and seccomp profile, from the bundle's config.json), stdin /dev/null,
// and waits for it. Writes to stdout and stderr are serialised, so they may be the same writer. It returns the process's exit code; a process killed by signal N gives
// 128+N. err is non-nil only when the process could not be run (unknown container gives
// errdefs.ErrNotFound) or ctx ended. stdout and stderr may be nil (discarded). Meant for tests
// and benchmarks; sandboxes run their commands through hutch-init instead.
func (r *Runtime) Exec(ctx context.Context, id string, args []string, stdout, stderr io.Writer) (int, error) {
	if err := checkID(id); err != nil {
		return -1, err
	}
	if len(args) == 0 {
		return -1, errdefs.Newf(errdefs.CodeInvalidArgument, "runc exec %s: empty args", id)
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	// runc reports its own failures with exit status 255 and a log line on stderr; keep the
	// tail of stderr to tell them apart from the process's own 255.
	tail := &tailBuffer{max: 4096}
	var mu sync.Mutex // stdout and stderr are often the same writer
	cmd := r.cli.Command(ctx, append([]string{"exec", id}, args...)...)
	cmd.Stdout = &ocicli.LockedWriter{Mu: &mu, W: stdout}
	cmd.Stderr = &ocicli.LockedWriter{Mu: &mu, W: io.MultiWriter(stderr, tail)}
	// runc exec joins the namespaces of the container's spec, which has no network namespace
	// when it joined a user namespace of hutchd's (JoinUserNS): start it in PID 1's.
	st, err := r.State(ctx, id)
	if err != nil {
		return -1, err
	}
	var how launch
	if st.Pid > 0 {
		how.netns = fmt.Sprintf("/proc/%d/ns/net", st.Pid)
	}
	err = how.run(cmd)
	if err == nil {
		return 0, nil
	}
	if ctx.Err() != nil {
		return -1, fmt.Errorf("runc exec %s: %w", id, errors.Join(errdefs.ErrDeadlineExceeded, ctx.Err()))
	}
	code := ocicli.ExitCode(err)
	if code == -1 || (code == 255 && strings.Contains(tail.String(), "level=error")) {
		return -1, runcError("exec", id, err, tail.String())
	}
	return code, nil
}

// RunOnce runs spec as a foreground `runc run` (no detach), waits for PID 1 to exit, removes the
// container and its bundle, and returns PID 1's exit code (128+N when killed by signal N).
// PID 1's stdout and stderr go to spec.LogPath (empty: discarded). It is the baseline hutchd's
// create→first-exec latency is benchmarked against.
func (r *Runtime) RunOnce(ctx context.Context, spec runtime.Spec) (int, error) {
	if err := ocispec.CheckSpec(spec); err != nil {
		return -1, err
	}
	oci, err := r.BuildSpec(spec)
	if err != nil {
		return -1, err
	}
	if _, err := r.State(ctx, spec.ID); err == nil {
		return -1, fmt.Errorf("runc run %s: %w", spec.ID, errdefs.ErrAlreadyExists)
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		return -1, err
	}
	bundle, err := r.writeBundle(spec.ID, oci)
	if err != nil {
		return -1, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := r.Delete(cctx, spec.ID, true); err != nil {
			r.log.Error("cleanup after run", "sandbox_id", spec.ID, "err", err)
		}
	}()
	stdin, out, err := r.cli.OpenStdio(spec.LogPath)
	if err != nil {
		return -1, err
	}
	defer stdin.Close()
	defer out.Close()
	cmd := r.cli.Command(ctx, "run", "--bundle", bundle, spec.ID)
	cmd.Stdin, cmd.Stdout = stdin, out
	// runc's own errors and PID 1's stderr share this fd; copy to the log and keep a tail.
	tail := &tailBuffer{max: 4096}
	cmd.Stderr = io.MultiWriter(out, tail)
	err = cmd.Run()
	if err == nil {
		return 0, nil
	}
	if ctx.Err() != nil {
		return -1, fmt.Errorf("runc run %s: %w", spec.ID, errors.Join(errdefs.ErrDeadlineExceeded, ctx.Err()))
	}
	code := ocicli.ExitCode(err)
	if code == -1 || (code == 1 || code == 255) && strings.Contains(tail.String(), "level=error") {
		return -1, runcError("run", spec.ID, err, tail.String())
	}
	return code, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }
