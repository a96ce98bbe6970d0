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
	"strings"
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
// Without req.Cwd the command runs in the session's cwd; when that directory no longer exists
// the command runs in the workdir ("/" when that is gone too), which becomes the session's
// cwd, and its stderr starts with "hutch: session cwd X no longer exists; running in Y". A
// req.Cwd that does not exist makes the command exit 1 with "hutch: cd: X: No such file or
// directory" on stderr.
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
	s.used = m.useSeq.Add(1)
	oldEnv := s.env // replaced, never changed in place
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
	} else {
		// A session cwd that is gone falls back to the workdir, with a warning; an explicit
		// per-command cwd that does not exist fails below like `cd`.
		var warning string
		if oldCwd, warning = m.sessionCwd(s, oldCwd); warning != "" {
			out = &warnOutput{Output: out, warning: []byte(warning)}
		}
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
	if strings.IndexByte(req.Command, 0) >= 0 {
		return Result{}, errdefs.New(errdefs.CodeStreamStartError, "start bash: command contains a NUL byte")
	}

	sh, err := m.takeWarm(runCtx, s) // runCtx: a Delete or Close ends the wait
	if err != nil {
		return Result{}, err
	}
	// From here on the session's shell is used up: prepare the next one once the state is saved.
	defer m.prewarm(s)
	var script []byte
	if m.warmFits(sh, oldEnv, oldCwd, req.Env, cmdCwd) {
		m.stats.warm.Add(1)
		script = payload(req.Command, req.Env, cmdCwd, req.Stdin != nil, true)
	} else {
		if sh != nil {
			m.stats.discarded.Add(1)
			go m.discard(sh)
		}
		env := oldEnv
		if len(req.Env) > 0 {
			env = maps.Clone(oldEnv)
			maps.Copy(env, req.Env)
		}
		if sh, err = spawnShell(env, cwd, m.stateDir, m.shim); err != nil {
			return Result{}, errdefs.Wrap(errdefs.CodeStreamStartError, err, "start bash")
		}
		m.stats.cold.Add(1)
		_, seconds := env["SECONDS"]
		script = payload(req.Command, nil, "", req.Stdin != nil, !seconds)
	}
	defer func() { go os.Remove(sh.statePath) }() // unlinking costs time too: not before the reply

	r := &run{logger: m.log}
	res, err := r.run(runCtx, cancel, req, sh, script, out)
	if err != nil {
		return res, err
	}
	st, ok, err := readState(sh.statePath)
	if err != nil {
		m.log.Warn("session state not saved", "session", s.id, "err", err)
	}
	if ok {
		newEnv, newCwd := mergeState(oldEnv, oldCwd, req.Env, cmdCwd, st)
		s.mu.Lock()
		s.env, s.cwd = newEnv, newCwd
		s.mu.Unlock()
	}
	return res, nil
}

// warnOutput writes a warning line to stderr right after the command started.
type warnOutput struct {
	Output
	warning []byte
}

func (w *warnOutput) Start(pid int) error {
	if err := w.Output.Start(pid); err != nil {
		return err
	}
	return w.Output.Stderr(w.warning)
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

// run gives sh its payload script and req's stdin, pumps its output into out, enforces the
// timeout and ctx, and waits. It owns sh: its pipes are closed when run returns.
func (r *run) run(ctx context.Context, cancel context.CancelCauseFunc, req Request, sh *shell, script []byte, out Output) (Result, error) {
	defer sh.closeFDs()
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return Result{}, errdefs.Wrap(errdefs.CodeStreamStartError, err, "eventfd")
	}
	defer unix.Close(wake)

	start := time.Now()
	pid, execID := sh.pid, sh.execID
	poke := func() {
		var one = [8]byte{1}
		_, _ = unix.Write(wake, one[:])
	}
	poked := make(chan struct{})
	go func() {
		// Exits when bash exits. run waits for it: wake must stay open until it has poked, or
		// the write could land in whatever file reuses the descriptor.
		defer close(poked)
		<-sh.exited
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
		case <-sh.exited:
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

	// Each writer exits when all is written, or bash's side is gone (EPIPE), or its pipe is
	// closed by closeFDs above. A short script fits the empty pipe and is written at once.
	scriptDone := make(chan struct{})
	feed := func(f *os.File, b []byte, done chan<- struct{}) {
		defer close(done)
		_, _ = f.Write(b)
		_ = f.Close()
	}
	if len(script) <= 4096 {
		feed(sh.script, script, scriptDone)
	} else {
		go feed(sh.script, script, scriptDone)
	}
	defer func() { <-scriptDone }()
	if req.Stdin != nil {
		stdinDone := make(chan struct{})
		go feed(sh.stdin, req.Stdin, stdinDone)
		defer func() { <-stdinDone }()
	} else {
		_ = sh.stdin.Close()
	}
	// Runs before the waits above, so a writer blocked on a full pipe is released.
	defer func() { _ = sh.script.Close(); _ = sh.stdin.Close() }()

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
	pump(sh.outR, sh.errR, wake, sh.exited, emit)
	<-poked
	<-killed
	res := Result{Duration: time.Since(start), ExitCode: exitCode(sh.cmd.ProcessState, sh.waitErr)}
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
// the child, of pipeSize bytes where the kernel allows.
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
	// Best effort: a bigger pipe batches small writes (see coalesceDelay); where the size is
	// refused the pipe keeps its default, 64 KiB.
	_, _ = unix.FcntlInt(uintptr(p[0]), unix.F_SETPIPE_SZ, pipeSize)
	return p[0], os.NewFile(uintptr(p[1]), "|1"), nil
}
