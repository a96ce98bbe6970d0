package terminal

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/session"
)

// drainWait bounds how long the exit waits for the output of a shell that has exited when
// something still holds the pseudo-terminal open (a process that left the session with setsid).
const drainWait = time.Second

// inputWait bounds a write of input to the shell: a program that does not read its input for
// that long makes the write fail, and the viewer that sent it is disconnected, rather than its
// frames piling up in the agent.
var inputWait = 10 * time.Second

// Terminal is one shell on a pseudo-terminal.
type Terminal struct {
	id, session string
	created     time.Time
	pid         int
	cmd         *exec.Cmd
	ptmx        *os.File // the pseudo-terminal's master, non-blocking (pollable): reads, writes
	ctl         *os.File // the same master, blocking: size ioctls only
	grace       time.Duration
	slow        time.Duration // Config.SlowViewer
	done        chan struct{} // closed once exited is set
	readerDone  chan struct{} // closed when the output reader has stopped
	writeMu     sync.Mutex    // one input write at a time, so chunks do not interleave

	mu         sync.Mutex
	ring       *ring            // guarded by mu
	cols, rows int              // guarded by mu
	viewers    map[*Viewer]bool // guarded by mu
	exited     bool             // all output is in ring; guarded by mu
	exitCode   int              // valid once exited; guarded by mu
	changed    chan struct{}    // closed (and replaced) on new output, exit, or a dropped viewer; guarded by mu
	progress   chan struct{}    // closed (and replaced) when a viewer reads or leaves; guarded by mu
}

// start runs the shell of a new terminal. m.mu is held.
func (m *Manager) start(id string, o Options) (*Terminal, error) {
	cwd, env, err := m.sessions.Snapshot(o.Session)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		cwd = m.sessions.Workdir()
		if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
			cwd = "/"
		}
	}
	env = setEnv(env, map[string]string{
		"TERM": "xterm-256color", "COLORTERM": "truecolor", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
		"PWD": cwd, "HUTCH_TERMINAL": id,
	})
	argv := append(slices.Clone(m.shim), o.Shell)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = cwd, env
	ctl, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(o.Cols), Rows: uint16(o.Rows)})
	if err != nil {
		return nil, errdefs.Wrap(errdefs.CodeCommandFailed, err, "start terminal shell").With("shell", o.Shell)
	}
	// A non-blocking duplicate for reads and writes, in Go's poller: closing it wakes a blocked
	// reader (a process that left the session may hold the other side open forever), and writes
	// can have a deadline.
	ptmx, err := pollable(ctl)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		ctl.Close()
		return nil, errdefs.Wrap(errdefs.CodeInternal, err, "terminal")
	}
	sess := o.Session
	if sess == "" {
		sess = session.DefaultID
	}
	t := &Terminal{
		id: id, session: sess, created: time.Now().UTC(), pid: cmd.Process.Pid, cmd: cmd, ptmx: ptmx, ctl: ctl,
		grace: m.grace, slow: m.slow, done: make(chan struct{}), readerDone: make(chan struct{}),
		ring: newRing(m.bufBytes), cols: o.Cols, rows: o.Rows, viewers: map[*Viewer]bool{},
		changed: make(chan struct{}), progress: make(chan struct{}),
	}
	go t.readLoop()
	go t.waitLoop()
	m.log.Info("terminal started", "terminal", id, "session", sess, "pid", t.pid, "shell", o.Shell)
	return t, nil
}

// pollable returns a non-blocking duplicate of f registered with Go's poller.
func pollable(f *os.File) (*os.File, error) {
	raw, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var fd int
	var derr error
	if err := raw.Control(func(orig uintptr) { fd, derr = unix.Dup(int(orig)) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "ptmx"), nil
}

// setEnv returns env ("KEY=value") with set's keys replaced.
func setEnv(env []string, set map[string]string) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		_, drop := set[k]
		return drop || k == session.MarkerEnv
	})
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// readLoop copies the shell's output into the ring until the pseudo-terminal reports EOF or
// EIO (every holder of its other side is gone) or is closed.
func (t *Terminal) readLoop() {
	defer close(t.readerDone)
	buf := make([]byte, 32<<10)
	for {
		n, err := t.ptmx.Read(buf)
		if n > 0 {
			t.append(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// append adds p to the ring once no attached viewer would lose bytes it has not read, waiting
// for them; a viewer that makes no progress for t.slow is dropped.
func (t *Terminal) append(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	deadline := time.Now().Add(t.slow)
	for {
		limit := t.ring.end + int64(len(p)) - int64(t.ring.size) // a viewer below this would lose bytes
		var lag *Viewer
		for v := range t.viewers {
			if !v.dropped && v.off < limit {
				lag = v
				break
			}
		}
		if lag == nil {
			break
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			lag.dropped = true
			t.notifyLocked()
			continue
		}
		ch := t.progress
		t.mu.Unlock()
		timer := time.NewTimer(wait)
		select {
		case <-ch:
			deadline = time.Now().Add(t.slow)
		case <-timer.C:
		}
		timer.Stop()
		t.mu.Lock()
	}
	t.ring.write(p)
	t.notifyLocked()
}

// notifyLocked wakes the viewers waiting for output. t.mu is held.
func (t *Terminal) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// progressLocked wakes an output reader waiting for viewers. t.mu is held.
func (t *Terminal) progressLocked() {
	close(t.progress)
	t.progress = make(chan struct{})
}

// waitLoop reaps the shell, hangs up what is left of its session, waits for the output to be
// read, and records the exit.
func (t *Terminal) waitLoop() {
	err := t.cmd.Wait()
	code := 0
	if err != nil {
		code = -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = exitCode(ee.ProcessState)
		}
	}
	// As a real terminal hang-up: the processes left in the shell's session (jobs it started)
	// get SIGHUP, then SIGKILL after the grace. Processes that left the session are not touched.
	t.signalTree(context.Background(), false) //nolint:forbidigo // the shell has ended: the hang-up belongs to no request
	select {
	case <-t.readerDone:
	case <-time.After(drainWait):
	}
	_ = t.ptmx.Close() // wakes the reader if something still holds the other side
	<-t.readerDone
	_ = t.ctl.Close()
	t.mu.Lock()
	t.exited, t.exitCode = true, code
	t.notifyLocked()
	t.mu.Unlock()
	close(t.done)
}

// exitCode is the shell's exit status, 128+N when killed by signal N.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signalTree sends SIGHUP to the terminal's processes (treeOf), waits for them to go for up to
// the grace period (or ctx), then SIGKILLs those left, repeatedly, until none is left or
// another grace period passed. With all, the first process (the shim, which ignores SIGHUP)
// and its descendants are included; without, only the session's members are.
func (t *Terminal) signalTree(ctx context.Context, all bool) {
	procs := func() []int {
		ps := treeOf(t.pid)
		if !all {
			ps = slices.DeleteFunc(ps, func(pid int) bool { return pid == t.pid })
		}
		return ps
	}
	ps := procs()
	if len(ps) == 0 {
		return
	}
	for _, pid := range ps {
		_ = unix.Kill(pid, unix.SIGHUP)
	}
	deadline := time.Now().Add(t.grace)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if len(procs()) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	deadline = time.Now().Add(t.grace)
	for {
		ps := procs()
		if len(ps) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range ps {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill ends the terminal (SIGHUP, grace, SIGKILL to the whole tree) and waits until its exit is
// recorded or ctx ends.
func (t *Terminal) kill(ctx context.Context) {
	select {
	case <-t.done:
		return
	default:
	}
	t.signalTree(ctx, true)
	select {
	case <-t.done: // reaped: its pid may belong to another process now
		return
	default:
		_ = unix.Kill(t.pid, unix.SIGKILL)
	}
	select {
	case <-t.done:
	case <-ctx.Done():
	}
}

// attach adds a viewer that starts at the oldest byte held; nil when the terminal has exited.
func (t *Terminal) attach() *Viewer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exited {
		return nil
	}
	v := &Viewer{t: t, off: t.ring.start(), closed: make(chan struct{})}
	v.ready = Ready{ID: t.id, Cols: t.cols, Rows: t.rows, PID: t.pid, ReplayBytes: t.ring.end - v.off}
	t.viewers[v] = true
	return v
}

func (t *Terminal) hasExited() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exited
}

// Info returns the terminal's record.
func (t *Terminal) Info() Info {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := Info{ID: t.id, Session: t.session, PID: t.pid, Cols: t.cols, Rows: t.rows, Viewers: len(t.viewers),
		CreatedAt: t.created, Exited: t.exited}
	if t.exited {
		code := t.exitCode
		in.ExitCode = &code
	}
	return in
}

// resize sets the window size (the shell's foreground job gets SIGWINCH).
func (t *Terminal) resize(cols, rows int) error {
	if err := ValidateSize(cols, rows); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exited {
		return errdefs.Newf(errdefs.CodeTerminalNotFound, "terminal %q has exited", t.id).With("terminalId", t.id)
	}
	if err := pty.Setsize(t.ctl, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}); err != nil {
		return errdefs.Wrap(errdefs.CodeInternal, err, "resize terminal")
	}
	t.cols, t.rows = cols, rows
	return nil
}

// write sends input to the shell. Input the program does not read within inputWait fails
// with RESOURCE_BUSY.
func (t *Terminal) write(p []byte) (int, error) {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	_ = t.ptmx.SetWriteDeadline(time.Now().Add(inputWait))
	n, err := t.ptmx.Write(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return n, errdefs.Newf(errdefs.CodeResourceBusy, "the terminal's program has not read its input for %s", inputWait)
	}
	return n, err
}
