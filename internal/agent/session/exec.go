package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
)

// Request is one command to run in a session.
type Request struct {
	// Command is a bash command line; empty gives INVALID_COMMAND.
	Command string
	// Env applies to this command only, on top of the session env.
	Env map[string]string
	// Cwd applies to this command only; relative resolves against the session cwd.
	Cwd string
	// Stdin is fed to the command when non-nil; nil means /dev/null.
	Stdin []byte
	// Timeout > 0 kills the command's whole tree when it expires (COMMAND_TIMEOUT).
	Timeout time.Duration
}

// Output receives a command's events from a single goroutine, in program order: Start once,
// then Stdout/Stderr chunks (at most ChunkSize bytes each; p is only valid during the call).
// An error from any method kills the command's tree and Exec returns that error.
type Output interface {
	Start(pid int) error
	Stdout(p []byte) error
	Stderr(p []byte) error
}

// ChunkSize is the largest chunk Output receives, in bytes: 64 KiB less room for an
// incomplete UTF-8 sequence (≤ 3 bytes) that a consumer holds back from the previous chunk, so
// re-chunked text still fits in 64 KiB.
const ChunkSize = 64<<10 - 4

// Result is a finished command.
type Result struct {
	// ExitCode is the shell's: 128+N when killed by signal N.
	ExitCode int
	// Duration is the wall time from start to exit.
	Duration time.Duration
}

// Exec runs req in session sessionID (empty = default, unknown = created) and waits for it.
// It holds the session's lock for the whole run, so commands of one session never overlap.
//
// Errors: INVALID_COMMAND (empty command), VALIDATION_FAILED (bad session ID),
// COMMAND_TIMEOUT (context: timeoutMs), SESSION_NOT_FOUND (session deleted meanwhile),
// STREAM_START_ERROR (bash could not be started), the cause of ctx when it ends first, or an
// Output error. In every error case the command's whole tree has been killed.
func (m *Manager) Exec(ctx context.Context, sessionID string, req Request, out Output) (Result, error) {
	if req.Command == "" {
		return Result{}, errdefs.New(errdefs.CodeInvalidCommand, "command is empty")
	}
	s, err := m.get(sessionID)
	if err != nil {
		return Result{}, err
	}
	select {
	case s.run <- struct{}{}:
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	}
	defer func() { <-s.run }()

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s.mu.Lock()
	if s.deleted {
		s.mu.Unlock()
		return Result{}, errSessionDeleted
	}
	s.cancel = cancel
	oldEnv := maps.Clone(s.env)
	oldCwd := s.cwd
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.cancel = nil
		s.mu.Unlock()
	}()

	cmdCwd := ""
	if req.Cwd != "" {
		cmdCwd = m.resolve(oldCwd, req.Cwd)
	}
	cwd := oldCwd
	if cmdCwd != "" {
		cwd = cmdCwd
	}
	if !dirExists(cwd) {
		// Like `cd` in a shell: exit 1 with a message on stderr.
		start := time.Now()
		if err := out.Start(0); err != nil {
			return Result{}, err
		}
		if err := out.Stderr([]byte("hutch: cd: " + cwd + ": No such file or directory\n")); err != nil {
			return Result{}, err
		}
		return Result{ExitCode: 1, Duration: time.Since(start)}, nil
	}

	execID := newExecID()
	env := maps.Clone(oldEnv)
	maps.Copy(env, req.Env)
	env[MarkerEnv] = execID
	env["PWD"] = cwd
	statePath := filepath.Join(m.stateDir, execID+".state")
	defer os.Remove(statePath)

	r := &run{logger: m.log}
	res, err := r.run(runCtx, cancel, req, cwd, envList(env), statePath, execID, out)
	if err != nil {
		return res, err
	}
	if st, ok := readState(statePath); ok {
		newEnv, newCwd := mergeState(oldEnv, oldCwd, req.Env, cmdCwd, st)
		s.mu.Lock()
		s.env, s.cwd = newEnv, newCwd
		s.mu.Unlock()
	}
	return res, nil
}

func newExecID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// run is the state of one running command.
type run struct {
	logger *slog.Logger

	mu    sync.Mutex
	cause error // why the tree was killed; guarded by mu
}

func (r *run) setCause(err error) {
	r.mu.Lock()
	if r.cause == nil {
		r.cause = err
	}
	r.mu.Unlock()
}

func (r *run) getCause() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cause
}

// bashPath is the shell used for every command.
func bashPath() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/bash"
}

// run starts bash, pumps its output into out, enforces the timeout and ctx, and waits.
func (r *run) run(ctx context.Context, cancel context.CancelCauseFunc, req Request, cwd string, env []string,
	statePath, execID string, out Output,
) (Result, error) {
	outR, outW, err := pipe()
	if err != nil {
		return Result{}, errdefs.Wrap(errdefs.CodeStreamStartError, err, "stdout pipe")
	}
	defer unix.Close(outR)
	errR, errW, err := pipe()
	if err != nil {
		outW.Close()
		return Result{}, errdefs.Wrap(errdefs.CodeStreamStartError, err, "stderr pipe")
	}
	defer unix.Close(errR)
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		outW.Close()
		errW.Close()
		return Result{}, errdefs.Wrap(errdefs.CodeStreamStartError, err, "eventfd")
	}
	defer unix.Close(wake)

	cmd := exec.Command(bashPath(), "--norc", "--noprofile", "-c", wrapperScript, "hutch", statePath, req.Command)
	cmd.Dir = cwd
	cmd.Env = env
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdinR, stdinW *os.File
	if req.Stdin != nil {
		pr, pw, err := os.Pipe()
		if err != nil {
			outW.Close()
			errW.Close()
			return Result{}, errdefs.Wrap(errdefs.CodeStreamStartError, err, "stdin pipe")
		}
		cmd.Stdin = pr
		stdinR, stdinW = pr, pw
	}

	start := time.Now()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if stdinR != nil {
		stdinR.Close()
	}
	if err != nil {
		if stdinW != nil {
			stdinW.Close()
		}
		return Result{}, errdefs.Wrap(errdefs.CodeStreamStartError, err, "start bash")
	}
	pid := cmd.Process.Pid
	if stdinW != nil {
		stdinDone := make(chan struct{})
		go func() {
			// Exits when all of stdin is written, or the reader side is gone (EPIPE), or
			// stdinW is closed below.
			defer close(stdinDone)
			_, _ = stdinW.Write(req.Stdin)
			_ = stdinW.Close()
		}()
		defer func() { _ = stdinW.Close(); <-stdinDone }()
	}

	poke := func() {
		var one = [8]byte{1}
		_, _ = unix.Write(wake, one[:])
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		// Exits when bash exits.
		waitErr = cmd.Wait()
		close(exited)
		poke()
	}()
	killed := make(chan struct{})
	go func() {
		// Exits when bash exits, or after killing the tree on timeout / ctx end.
		defer close(killed)
		var timer <-chan time.Time
		if req.Timeout > 0 {
			t := time.NewTimer(req.Timeout)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-exited:
			return
		case <-timer:
			r.setCause(errdefs.Newf(errdefs.CodeCommandTimeout, "command timed out after %s", req.Timeout).
				With("timeoutMs", req.Timeout.Milliseconds()))
		case <-ctx.Done():
			r.setCause(context.Cause(ctx))
		}
		if left := killTree(pid, execID); left > 0 {
			r.logger.Warn("processes survived the tree kill", "exec_id", execID, "left", left)
		}
		poke()
	}()

	sinkErr := out.Start(pid)
	if sinkErr != nil {
		cancel(sinkErr)
	}
	emit := func(stderr bool, p []byte) {
		if sinkErr != nil {
			return
		}
		if stderr {
			sinkErr = out.Stderr(p)
		} else {
			sinkErr = out.Stdout(p)
		}
		if sinkErr != nil {
			cancel(sinkErr)
		}
	}
	pump(outR, errR, wake, exited, emit)
	<-exited
	<-killed
	res := Result{Duration: time.Since(start), ExitCode: exitCode(cmd.ProcessState, waitErr)}
	if cause := r.getCause(); cause != nil {
		return res, cause
	}
	if sinkErr != nil {
		return res, sinkErr
	}
	return res, nil
}

func exitCode(ps *os.ProcessState, waitErr error) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		return ee.ExitCode()
	}
	return ps.ExitCode()
}

// pipe returns a non-blocking, close-on-exec read end (raw fd) and a blocking write end for
// the child.
func pipe() (int, *os.File, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, nil, fmt.Errorf("pipe2: %w", err)
	}
	if err := unix.SetNonblock(p[0], true); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return -1, nil, fmt.Errorf("set nonblock: %w", err)
	}
	return p[0], os.NewFile(uintptr(p[1]), "|1"), nil
}
