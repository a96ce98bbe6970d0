package interp

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/reaper"
	"github.com/hutchdev/hutch/internal/agent/session"
)

// pythonDriver is the program each Python kernel runs (python3 -u -c): it reads commands as
// JSON lines on fd 3 and writes events as JSON lines on fd 4, running code in IPython's
// InteractiveShell.
//
//go:embed python_driver.py
var pythonDriver string

// pythonSync is written by the driver to its fd 1 and fd 2 at the end of every run, so the
// kernel knows that the output of child processes written before it has been forwarded.
const pythonSync = "\x00\x1bhutch-sync\x00"

// pythonStartTimeout bounds the start of a Python kernel (import of IPython included).
const pythonStartTimeout = 60 * time.Second

// PythonConfig configures NewPythonFactory.
type PythonConfig struct {
	// Python is the interpreter (a name looked up in PATH, or a path); "" means "python3".
	Python string
	// Workdir is the default cwd of kernels (absolute).
	Workdir string
	// Env is the base environment ("KEY=value"), usually the sandbox's; the kernel adds
	// PYTHONUNBUFFERED=1 and MPLBACKEND=Agg.
	Env []string
	// Logger receives diagnostics; nil means slog.Default().
	Logger *slog.Logger
}

// NewPythonFactory returns the factory of "python" kernels: one `python3 -u` process each, in
// its own session (setsid), at nice 19 and oom_score_adj 500 like other commands, running
// IPython. Factory errors: INVALID_PATH (cwd is not a
// directory), VALIDATION_FAILED (a bad env name), INTERPRETER_NOT_AVAILABLE (python3 or
// IPython missing, or the interpreter died while starting; the message says which).
func NewPythonFactory(cfg PythonConfig) KernelFactory {
	if cfg.Python == "" {
		cfg.Python = "python3"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return func(ctx context.Context, cwd string, env map[string]string) (Kernel, error) {
		return startPython(ctx, cfg, cwd, env)
	}
}

// pyMsg is one event line from the driver.
type pyMsg struct {
	Type      string         `json:"type"`
	Text      string         `json:"text"`
	Data      map[string]any `json:"data"`
	Count     *int           `json:"count"`
	Name      string         `json:"name"`
	Value     string         `json:"value"`
	Traceback []string       `json:"traceback"`
	PID       int            `json:"pid"`
}

// pythonKernel is a running driver process.
type pythonKernel struct {
	cmd    *exec.Cmd
	pid    int
	cmdW   *os.File   // the driver's fd 3
	msgs   chan pyMsg // events from fd 4; closed when the driver's fd 4 ends
	syncs  chan struct{}
	exited chan struct{} // closed when the process has been waited for
	log    *slog.Logger

	mu      sync.Mutex
	emit    func(Event) // guarded by mu; the run in progress, or nil
	running bool        // guarded by mu
	closed  bool        // guarded by mu
	stderr  []byte      // guarded by mu; kept while starting, for the error message

	runMu sync.Mutex // one Run or Configure at a time
}

// validateKernelEnv checks env names. Errors: VALIDATION_FAILED.
func validateKernelEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return errdefs.Newf(errdefs.CodeInvalidArgument, "invalid environment variable %q", k).With("name", k)
		}
	}
	return nil
}

// checkCwd returns an INVALID_PATH error unless cwd ("" is fine) is a directory.
func checkCwd(cwd string) error {
	if cwd == "" {
		return nil
	}
	fi, err := os.Stat(cwd)
	if err != nil || !fi.IsDir() {
		return errdefs.Newf(errdefs.CodeInvalidPath, "cwd %q is not a directory", cwd).With("path", cwd)
	}
	return nil
}

func startPython(ctx context.Context, cfg PythonConfig, cwd string, env map[string]string) (*pythonKernel, error) {
	if err := validateKernelEnv(env); err != nil {
		return nil, err
	}
	if err := checkCwd(cwd); err != nil {
		return nil, err
	}
	bin, err := exec.LookPath(cfg.Python)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.CodeInterpreterMissing, err, "python3 is not installed in the sandbox image").With("interpreter", cfg.Python)
	}
	if cwd == "" {
		cwd = cfg.Workdir
	}
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("interp: pipe: %w", err)
	}
	evR, evW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		return nil, fmt.Errorf("interp: pipe: %w", err)
	}
	cmd := exec.Command(bin, "-u", "-c", pythonDriver)
	cmd.Dir = cwd
	cmd.Env = append(append([]string(nil), cfg.Env...), "PYTHONUNBUFFERED=1", "MPLBACKEND=Agg", "PYTHONIOENCODING=utf-8")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.ExtraFiles = []*os.File{cmdR, evW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	outR, err := cmd.StdoutPipe()
	if err == nil {
		var errR io.ReadCloser
		if errR, err = cmd.StderrPipe(); err == nil {
			k := &pythonKernel{cmd: cmd, cmdW: cmdW, msgs: make(chan pyMsg, 256), syncs: make(chan struct{}, 4), exited: make(chan struct{}), log: cfg.Logger}
			if err = cmd.Start(); err == nil {
				cmdR.Close()
				evW.Close()
				k.pid = cmd.Process.Pid
				demote(k.pid)
				go k.readEvents(evR)
				go k.readOutput(outR, EventStdout)
				go k.readOutput(errR, EventStderr)
				go func() { _ = cmd.Wait(); close(k.exited) }()
				if err := k.awaitReady(ctx); err != nil {
					_ = k.Close()
					return nil, err
				}
				return k, nil
			}
		}
	}
	cmdR.Close()
	cmdW.Close()
	evR.Close()
	evW.Close()
	return nil, errdefs.Wrap(errdefs.CodeInterpreterMissing, err, "could not start python3").With("interpreter", bin)
}

// demote gives the kernel (and so every process it starts) the priority of the agent's other
// commands, as hutch-init's shim does: nice reaper.CommandNice and oom_score_adj
// reaper.CommandOOMScoreAdj, so that runaway code cannot starve the agent and the kernel is
// picked before the agent when memory runs out. It runs right after the start, before the
// interpreter made threads or children, which inherit both. Failures are ignored (as in the
// shim).
func demote(pid int) {
	_ = unix.Setpriority(unix.PRIO_PROCESS, pid, reaper.CommandNice)
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid), []byte(reaper.CommandOOMScoreAdj), 0)
}

// awaitReady waits for the driver's ready event.
func (k *pythonKernel) awaitReady(ctx context.Context) error {
	t := time.NewTimer(pythonStartTimeout)
	defer t.Stop()
	select {
	case m, ok := <-k.msgs:
		if ok && m.Type == "ready" {
			k.mu.Lock()
			k.stderr = nil
			k.mu.Unlock()
			return nil
		}
		<-k.exited
		time.Sleep(20 * time.Millisecond) // let the stderr reader take the last bytes
		k.mu.Lock()
		msg := strings.TrimSpace(string(k.stderr))
		k.mu.Unlock()
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:] // the exception line, e.g. "ModuleNotFoundError: No module named 'IPython'"
		}
		if strings.Contains(msg, "No module named 'IPython'") {
			return errdefs.New(errdefs.CodeInterpreterMissing, "IPython is not installed in the sandbox image (the Python kernel needs ipython3)").With("interpreter", "ipython3")
		}
		return errdefs.Newf(errdefs.CodeInterpreterMissing, "the Python kernel exited while starting: %s", msg).With("interpreter", "python3")
	case <-t.C:
		return errdefs.Newf(errdefs.CodeInterpreterMissing, "the Python kernel did not start within %s", pythonStartTimeout).With("interpreter", "python3")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readEvents turns the driver's fd 4 into messages.
func (k *pythonKernel) readEvents(r *os.File) {
	defer close(k.msgs)
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := readLine(br, maxEventLine)
		if errors.Is(err, errLineTooLong) {
			// Code in the kernel wrote an endless line to the event descriptor: the kernel is
			// unusable; its exit (msgs closed) ends the run and it is restarted.
			k.log.Warn("interp: an event line from the python driver exceeds the limit: closing it", "limit", maxEventLine)
			return
		}
		if len(bytes.TrimSpace(line)) > 0 {
			var m pyMsg
			if jerr := json.Unmarshal(line, &m); jerr != nil {
				k.log.Warn("interp: bad event from the python driver", "err", jerr)
			} else {
				k.msgs <- m
			}
		}
		if err != nil {
			return
		}
	}
}

// readOutput forwards what child processes write to the driver's fd 1 or 2 as events of typ,
// and notices the end-of-run marker.
func (k *pythonKernel) readOutput(r io.Reader, typ string) {
	buf := make([]byte, 32<<10)
	var pending []byte
	for {
		n, err := r.Read(buf)
		pending = append(pending, buf[:n]...)
		for {
			i := bytes.Index(pending, []byte(pythonSync))
			if i < 0 {
				break
			}
			k.out(typ, pending[:i])
			pending = pending[i+len(pythonSync):]
			k.syncs <- struct{}{}
		}
		if err != nil {
			k.out(typ, pending)
			return
		}
		// Hold back a possible start of the marker and an incomplete UTF-8 sequence.
		keep := 0
		for j := min(len(pythonSync)-1, len(pending)); j > 0; j-- {
			if bytes.HasSuffix(pending, []byte(pythonSync[:j])) {
				keep = j
				break
			}
		}
		head := pending[:len(pending)-keep]
		head = head[:len(head)-utf8Tail(head)]
		k.out(typ, head)
		pending = append([]byte(nil), pending[len(head):]...)
	}
}

// utf8Tail returns how many bytes at the end of b are an incomplete UTF-8 sequence.
func utf8Tail(b []byte) int {
	for i := 1; i <= 3 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return 0
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}

// out sends child-process output to the run in progress; between runs it is kept while the
// kernel starts (for the error message) and dropped after.
func (k *pythonKernel) out(typ string, p []byte) {
	if len(p) == 0 {
		return
	}
	k.mu.Lock()
	emit := k.emit
	if emit == nil && typ == EventStderr && len(k.stderr) < 64<<10 {
		k.stderr = append(k.stderr, p...)
	}
	k.mu.Unlock()
	if emit != nil {
		emit(Event{Type: typ, Text: strings.ToValidUTF8(string(p), "\uFFFD")})
	}
}

// send writes one command line to the driver.
func (k *pythonKernel) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("interp: encode command: %w", err)
	}
	if _, err := k.cmdW.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("interp: the python kernel is gone: %w", err)
	}
	return nil
}

// Configure implements Configurer: os.chdir and os.environ in the driver. Errors: INVALID_PATH,
// VALIDATION_FAILED, or the kernel's failure.
func (k *pythonKernel) Configure(ctx context.Context, cwd string, env map[string]string) error {
	if err := validateKernelEnv(env); err != nil {
		return err
	}
	if err := checkCwd(cwd); err != nil {
		return err
	}
	if cwd == "" && len(env) == 0 {
		return nil
	}
	k.runMu.Lock()
	defer k.runMu.Unlock()
	if err := k.send(map[string]any{"op": "configure", "cwd": cwd, "env": env}); err != nil {
		return err
	}
	for {
		select {
		case m, ok := <-k.msgs:
			if !ok {
				return errors.New("interp: the python kernel exited while being configured")
			}
			switch m.Type {
			case "configured":
				return nil
			case "fatal":
				return errdefs.Newf(errdefs.CodeInvalidPath, "could not apply cwd or env: %s", m.Value).With("path", cwd)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Run implements Kernel.
func (k *pythonKernel) Run(ctx context.Context, code string, emit func(Event)) (int, error) {
	k.runMu.Lock()
	defer k.runMu.Unlock()
	for len(k.syncs) > 0 {
		<-k.syncs
	}
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return 0, errors.New("interp: the python kernel is closed")
	}
	k.emit, k.running = emit, true
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.emit, k.running = nil, false
		k.mu.Unlock()
	}()
	if err := k.send(map[string]any{"op": "run", "code": code}); err != nil {
		return 0, err
	}
	for m := range k.msgs {
		count := 0
		if m.Count != nil {
			count = *m.Count
		}
		switch m.Type {
		case EventStdout, EventStderr:
			emit(Event{Type: m.Type, Text: m.Text})
		case EventResult:
			emit(Event{Type: EventResult, Data: m.Data, ExecutionCount: count})
		case EventError:
			emit(Event{Type: EventError, Name: m.Name, Value: m.Value, Traceback: m.Traceback})
		case "done":
			// Wait for the markers on fd 1 and 2 (bounded: code may have closed them).
			t := time.NewTimer(500 * time.Millisecond)
			for got := 0; got < 2; got++ {
				select {
				case <-k.syncs:
				case <-t.C:
					got = 2
				}
			}
			t.Stop()
			return count, nil
		}
	}
	return 0, errors.New("interp: the python kernel exited")
}

// Interrupt implements Kernel: SIGINT to the interpreter's main thread while a run is in
// progress.
func (k *pythonKernel) Interrupt() error {
	k.mu.Lock()
	running, closed := k.running, k.closed
	k.mu.Unlock()
	if !running || closed {
		return nil
	}
	// To the main thread (tid = pid), where Python runs its handlers and where a blocking call
	// must see EINTR; a process-directed signal may go to another thread.
	if err := unix.Tgkill(k.pid, k.pid, unix.SIGINT); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("interp: interrupt: %w", err)
	}
	return nil
}

// Exited implements Kernel.
func (k *pythonKernel) Exited() bool {
	select {
	case <-k.exited:
		return true
	default:
		return false
	}
}

// Close implements Kernel: SIGKILL to the interpreter, its session and its descendants, then
// waits (at most 5 s) for it to be reaped.
func (k *pythonKernel) Close() error {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	killTree(k.pid)
	k.cmdW.Close()
	select {
	case <-k.exited:
	case <-time.After(5 * time.Second):
		return fmt.Errorf("interp: python kernel %d did not exit", k.pid)
	}
	return nil
}

// killTree SIGKILLs root, the members of its session and every descendant of any of them.
func killTree(root int) {
	for range 3 {
		procs := session.ScanProcs()
		children := map[int][]int{}
		for _, p := range procs {
			children[p.Ppid] = append(children[p.Ppid], p.Pid)
		}
		seen := map[int]bool{}
		queue := []int{root}
		for _, p := range procs {
			if p.Sid == root {
				queue = append(queue, p.Pid)
			}
		}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if seen[p] {
				continue
			}
			seen[p] = true
			queue = append(queue, children[p]...)
		}
		_ = unix.Kill(root, unix.SIGKILL)
		if len(seen) <= 1 {
			return
		}
		for p := range seen {
			_ = unix.Kill(p, unix.SIGKILL)
		}
	}
}
