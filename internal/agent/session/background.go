package session

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/reaper"
)

// BackgroundRequest is a command to start in the background.
type BackgroundRequest struct {
	// Command is a bash command line; empty (or blank) gives INVALID_COMMAND.
	Command string
	// Env applies to this command only, on top of the session env.
	Env map[string]string
	// Cwd applies to this command only; relative resolves against the session cwd.
	Cwd string
}

// Background is a command started with StartBackground. Its methods are safe for concurrent
// use.
type Background struct {
	sh      *shell
	cwd     string
	warning string // written to stderr first ("" for none): the session cwd was gone
	shimmed bool   // sh.pid is the shim, not bash
	log     *slog.Logger

	done     chan struct{} // closed once the root is reaped and its output drained
	exitCode int           // valid once done is closed

	termMu sync.Mutex // one Terminate at a time

	mu     sync.Mutex
	exited bool          // the root was reaped before any Terminate began; guarded by mu
	term   chan struct{} // made when Terminate begins, closed once its tree is gone; guarded by mu
	forced bool          // Terminate had to SIGKILL after the grace; set before term is closed
}

// StartBackground starts req in session sessionID (empty = default, unknown = created) and
// returns at once. The command is `bash -c` in the session's cwd and exported environment
// (plus req's overrides), with stdin /dev/null, under the Manager's shim in its own process
// group and marked with MarkerEnv, like Exec. Unlike Exec it does not take the session's lock
// (a foreground command of the session may run at the same time) and the session's state is
// never changed by it, except that a session cwd that no longer exists is replaced by the
// workdir as in Exec (the command runs there, its stderr starts with a warning line). A
// per-command cwd that does not exist makes the command exit 1 with a message on stderr, as
// Exec does.
//
// output receives the command's stdout (stderr false) and stderr chunks, at most ChunkSize
// bytes each, from a single goroutine, until the command has exited and its pipes are drained
// (Done). p is only valid during the call; output should be quick, as the command's pipes are
// not read while it runs.
//
// Errors: INVALID_COMMAND (empty command, NUL byte), VALIDATION_FAILED (bad session ID),
// SESSION_NOT_FOUND (session deleted), STREAM_START_ERROR (the shim or bash could not be
// started: a failed fork under pid pressure, say; with a shim, StartBackground waits for its
// report that bash runs).
func (m *Manager) StartBackground(sessionID string, req BackgroundRequest, output func(stderr bool, p []byte)) (*Background, error) {
	if strings.TrimSpace(req.Command) == "" {
		return nil, errdefs.New(errdefs.CodeInvalidCommand, "command is empty")
	}
	if strings.IndexByte(req.Command, 0) >= 0 {
		return nil, errdefs.New(errdefs.CodeInvalidCommand, "command contains a NUL byte")
	}
	s, err := m.get(sessionID)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.deleted {
		s.mu.Unlock()
		return nil, errSessionDeleted
	}
	env, cwd := s.env, s.cwd // env is replaced, never changed in place
	s.mu.Unlock()
	var warning string
	if req.Cwd != "" {
		cwd = m.resolve(cwd, req.Cwd)
	} else {
		cwd, warning = m.sessionCwd(s, cwd) // a session cwd that is gone: the workdir, warned
	}
	if len(req.Env) > 0 {
		env = maps.Clone(env)
		maps.Copy(env, req.Env)
	}
	startDir, cdTo := cwd, ""
	if !dirExists(cwd) {
		// The payload's cd fails like a shell's: exit 1 with the message on stderr.
		startDir, cdTo = "/", cwd
	}
	sh, err := spawn(env, startDir, m.stateDir, m.shim, true)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.CodeStreamStartError, err, "start bash")
	}
	if err := readShimStatus(sh); err != nil {
		sh.discard()
		return nil, errdefs.Wrap(errdefs.CodeStreamStartError, err, "start bash")
	}
	m.stats.cold.Add(1)
	_, seconds := env["SECONDS"]
	script := payload(req.Command, nil, cdTo, false, !seconds)
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		sh.discard()
		return nil, errdefs.Wrap(errdefs.CodeStreamStartError, err, "eventfd")
	}
	b := &Background{sh: sh, cwd: cwd, warning: warning, shimmed: len(m.shim) > 0, log: m.log, done: make(chan struct{})}
	go b.run(script, wake, output)
	return b, nil
}

// run feeds the payload, pumps the output and records the exit. It owns sh and wake.
func (b *Background) run(script []byte, wake int, output func(stderr bool, p []byte)) {
	sh := b.sh
	_ = sh.stdin.Close() // stdin stays /dev/null
	scriptDone := make(chan struct{})
	go func() {
		// Exits when the payload is written or bash's side is gone.
		defer close(scriptDone)
		_, _ = sh.script.Write(script)
		_ = sh.script.Close()
	}()
	// ended is closed once the root has exited and, when a Terminate began before that,
	// once Terminate is through with the tree: the pipes are read until then.
	ended := make(chan struct{})
	poked := make(chan struct{})
	go func() {
		// Exits when the root has exited (and a Terminate in progress has finished); wake must
		// stay open until it has poked.
		defer close(poked)
		<-sh.exited
		b.mu.Lock()
		term := b.term
		b.exited = term == nil
		b.mu.Unlock()
		if term != nil {
			<-term
		}
		close(ended)
		var one = [8]byte{1}
		_, _ = unix.Write(wake, one[:])
	}()
	if b.warning != "" {
		output(true, []byte(b.warning))
	}
	pump(sh.outR, sh.errR, wake, ended, output)
	<-poked
	_ = sh.script.Close()
	<-scriptDone
	sh.closeFDs()
	unix.Close(wake)
	_ = os.Remove(sh.statePath)
	b.exitCode = exitCode(sh.cmd.ProcessState, sh.waitErr)
	b.mu.Lock()
	if b.forced {
		b.exitCode = 137 // something of the tree outlived the grace and was killed
	}
	b.mu.Unlock()
	close(b.done)
}

// shimStartTimeout bounds the wait for the shim's start report.
const shimStartTimeout = 30 * time.Second

// readShimStatus reads the shim's start report from sh.status (none without a shim) and
// closes it. It returns why bash was not started, or nil when it was.
func readShimStatus(sh *shell) error {
	r := sh.status
	if r == nil {
		return nil
	}
	defer func() {
		r.Close()
		sh.status = nil
	}()
	_ = r.SetReadDeadline(time.Now().Add(shimStartTimeout))
	var buf [512]byte
	n := 0
	var err error
	for n < len(buf) && err == nil && (n == 0 || buf[0] != reaper.ShimStarted) {
		var k int
		k, err = r.Read(buf[n:])
		n += k
	}
	switch {
	case n > 0 && buf[0] == reaper.ShimStarted:
		return nil
	case n > 0 && buf[0] == reaper.ShimFailed:
		return errors.New("shim: " + strings.TrimSpace(string(buf[1:n])))
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("shim did not start bash within %s", shimStartTimeout)
	default:
		return fmt.Errorf("shim exited before starting bash: %s", exitText(sh))
	}
}

// exitText describes how the shell's root process ended, waiting a little for it to end.
func exitText(sh *shell) string {
	select {
	case <-sh.exited:
		return fmt.Sprintf("exit %d", exitCode(sh.cmd.ProcessState, sh.waitErr))
	case <-time.After(5 * time.Second):
		return "it closed its status pipe without a report"
	}
}

// PID returns the process the agent started: the shim, or bash without a shim. It leads the
// command's process group.
func (b *Background) PID() int { return b.sh.pid }

// Cwd returns the absolute directory the command was started in (the session cwd or the
// per-command cwd resolved against it).
func (b *Background) Cwd() string { return b.cwd }

// ExecID returns the command's MarkerEnv value.
func (b *Background) ExecID() string { return b.sh.execID }

// Done is closed once the command has exited and its output has been delivered.
func (b *Background) Done() <-chan struct{} { return b.done }

// Wait blocks until Done and returns the exit code: the shell's, 128+N when killed by
// signal N; 137 when Terminate had to SIGKILL part of the tree after the grace.
func (b *Background) Wait() int {
	<-b.done
	return b.exitCode
}

// treePollInterval is how often Terminate checks whether the tree is gone.
const treePollInterval = 20 * time.Millisecond

// Terminate ends the command's whole tree: SIGTERM to every descendant of the started process
// (bash and everything below it, never the shim; bash itself too when there is no shim; under
// the shim this includes processes that called setsid or were orphaned by a double fork) and
// to every process carrying the command's marker, then it waits up to grace for all of them to
// be gone, signalling every 20 ms the processes of the tree that appeared since (a fork that
// raced the first pass), then kills whatever is left with SIGKILL (killTree). The command is Done only once
// all of that is over: bash dying of the SIGTERM while a child that ignores it runs on does not
// end it. The exit code is bash's (usually 143) when everything was gone within the grace,
// else 137. It returns once the command is Done; the result reports whether it was still
// running when Terminate was called. Processes the command left behind after it exited on its
// own are not touched.
func (b *Background) Terminate(grace time.Duration) bool {
	b.termMu.Lock()
	defer b.termMu.Unlock()
	b.mu.Lock()
	if b.exited || b.term != nil {
		// It ended on its own, or an earlier Terminate ended it.
		b.mu.Unlock()
		<-b.done
		return false
	}
	term := make(chan struct{})
	b.term = term
	b.mu.Unlock()
	root, execID := b.sh.pid, b.sh.execID
	needle := []byte(MarkerEnv + "=" + execID + "\x00")
	// The processes signalled, with their start times (a pid may be reused meanwhile).
	var targets []procRef
	signalled := map[procRef]bool{}
	signal := func(pid int) {
		if b.shimmed && pid == root {
			return // the shim (it carries the marker too) exits with bash, reporting its status
		}
		if st, ok := procStartTime(pid); ok && !signalled[procRef{pid, st}] {
			signalled[procRef{pid, st}] = true
			targets = append(targets, procRef{pid, st})
			_ = unix.Kill(pid, unix.SIGTERM)
		}
	}
	// signalTree signals every process of the tree not signalled yet: a process forked after
	// an earlier pass (bash forking the command as the SIGTERM arrives, its handler running
	// the EXIT trap only after the fork) gets its SIGTERM on a later pass, not just the SIGKILL
	// after the grace. It reports whether a marked process is left.
	signalTree := func() (marked bool) {
		if b.sh.alive() {
			signal(root)
			for _, p := range descendants(root) {
				signal(p.pid)
			}
		}
		forEachMarked(needle, func(pid int) {
			if !(b.shimmed && pid == root) {
				marked = true
			}
			signal(pid)
		})
		return marked
	}
	signalTree()

	gone := func() bool {
		marked := signalTree()
		if b.sh.alive() || marked {
			return false
		}
		for _, t := range targets {
			if t.alive() {
				return false
			}
		}
		return true
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(treePollInterval)
	defer tick.Stop()
	allGone := gone()
wait:
	for !allGone {
		select {
		case <-deadline.C:
			break wait
		case <-tick.C:
		}
		allGone = gone()
	}
	killRoot := 0
	if b.sh.alive() {
		killRoot = root
	}
	for _, t := range targets {
		if t.alive() {
			_ = unix.Kill(t.pid, unix.SIGKILL)
		}
	}
	if left := killTree(killRoot, execID); left > 0 {
		b.log.Warn("processes survived the tree kill", "exec_id", execID, "left", left)
	}
	b.mu.Lock()
	b.forced = !allGone
	b.mu.Unlock()
	close(term)
	<-b.done
	return true
}

// procRef is one process, identified by pid and start time.
type procRef struct {
	pid   int
	start uint64
}

// alive reports whether the process still exists (not a zombie) and is the same one.
func (p procRef) alive() bool {
	st, ok := procStartTime(p.pid)
	return ok && st == p.start
}

// procStartTime returns the start time (field 22 of /proc/<pid>/stat, in clock ticks) of a
// live, non-zombie process.
func procStartTime(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	// After the comm: state(3) ppid(4) … starttime(22): index 22-3 = 19.
	if len(f) < 20 || string(f[0]) == "Z" || string(f[0]) == "X" {
		return 0, false
	}
	st, err := strconv.ParseUint(string(f[19]), 10, 64)
	return st, err == nil
}
