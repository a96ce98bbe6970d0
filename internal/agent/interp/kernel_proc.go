package interp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/reaper"
	"github.com/hutchdev/hutch/internal/agent/session"
	"github.com/hutchdev/hutch/internal/envlimit"
)

// The driver protocol, shared by the Python and the JavaScript driver:
//
//   - Commands arrive as JSON lines on fd 3, events leave as JSON lines on fd 4. At start the
//     driver moves both to close-on-exec descriptors (Python: above fd 300; node: reopened
//     through /proc/self/fd) and closes fds 3 and 4, so child processes inherit neither and
//     user code does not find them at a known number.
//   - Every command carries a fresh random nonce "n" (128 bits); every event the driver writes
//     for it starts with {"n":"<nonce>", so the agent drops lines user code writes to the event
//     descriptor (a fake "done" or result), and finds the driver's line again after a partial
//     line user code left without a newline.
//   - At the end of a run the driver writes syncMarker(nonce) to fd 1 and fd 2, then the "done"
//     event: once both markers came through, all output that child processes wrote before is
//     forwarded. A marker with another nonce (user code printing one) is plain output.
//   - The first event, {"type":"ready","pid":N}, is written before any user code ran; N is the
//     interpreter's PID (the process that gets SIGINT; under the shim it is not the one the
//     agent started).

// syncMarkerPrefix starts the end-of-run marker on fd 1 and 2: syncMarkerPrefix + nonce + NUL.
const syncMarkerPrefix = "\x00\x1bhutch-sync:"

func syncMarker(nonce string) string { return syncMarkerPrefix + nonce + "\x00" }

// kernelMarkerEnv is set to a random ID in every kernel's environment; Close kills every
// process that still carries it (one that left the subreaper's tree because the shim died).
const kernelMarkerEnv = "HUTCH_KERNEL_ID"

// driverMsg is one event line from a driver.
type driverMsg struct {
	Nonce     string         `json:"n"`
	Type      string         `json:"type"`
	Text      string         `json:"text"`
	Data      map[string]any `json:"data"`
	Count     *int           `json:"count"`
	Name      string         `json:"name"`
	Value     string         `json:"value"`
	Traceback []string       `json:"traceback"`
	PID       int            `json:"pid"`
}

// procSpec describes a driver process.
type procSpec struct {
	lang         string   // "python" or "node", for messages
	argv         []string // the interpreter (a path) and its arguments
	dir          string
	env          []string
	extraEnv     []string // added after env and the marker
	shim         []string // argv prefix (the subreaper shim), or nil
	startTimeout time.Duration
	mainThread   bool // Interrupt signals the main thread (tgkill), not the process
	// startErr turns what the driver wrote to stderr while dying at start into the factory's
	// error.
	startErr func(stderr string) error
}

// kernelProc is a running driver process: the plumbing both kernels share.
type kernelProc struct {
	spec   procSpec
	cmd    *exec.Cmd
	root   int    // the process the agent started (the shim, or the interpreter)
	pid    int    // the interpreter (from the ready event)
	marker string // kernelMarkerEnv's value
	cmdW   *os.File
	msgs   chan driverMsg // events of the command in progress; closed when fd 4 ends
	syncs  chan struct{}  // one per end-of-run marker of the run in progress
	exited chan struct{}  // closed when the started process has been waited for
	log    *slog.Logger

	mu      sync.Mutex
	nonce   string      // guarded by mu; the command in progress ("" before ready)
	emit    func(Event) // guarded by mu; the run in progress, or nil
	running bool        // guarded by mu
	closed  bool        // guarded by mu
	stderr  []byte      // guarded by mu; kept while starting, for the error message
	dropped int         // guarded by mu; event lines dropped (wrong nonce, unparsable)

	runMu sync.Mutex // one command at a time
}

func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// prepareStart checks a kernel's env and cwd and finds its interpreter: it returns the
// interpreter's path and the cwd to use (workdir for ""). Errors: VALIDATION_FAILED (a bad env
// name), INVALID_PATH (cwd is not a directory), INTERPRETER_NOT_AVAILABLE (name is missing).
func prepareStart(interpreter, name, cwd, workdir string, env map[string]string) (string, string, error) {
	if err := validateKernelEnv(env); err != nil {
		return "", "", err
	}
	if err := checkCwd(cwd); err != nil {
		return "", "", err
	}
	bin, err := exec.LookPath(interpreter)
	if err != nil {
		return "", "", errdefs.Wrap(errdefs.CodeInterpreterMissing, err, name+" is not installed in the sandbox image").With("interpreter", interpreter)
	}
	if cwd == "" {
		cwd = workdir
	}
	return bin, cwd, nil
}

// startProc starts a driver with env added to spec.env and waits for its ready event.
// Errors: INTERPRETER_NOT_AVAILABLE (spec.startErr's, or the process could not start),
// INTERPRETER_START_TIMEOUT (no ready event within spec.startTimeout), ctx's.
func startProc(ctx context.Context, spec procSpec, env map[string]string, log *slog.Logger) (*kernelProc, error) {
	spec.env = slices.Clone(spec.env)
	for k, v := range env {
		spec.env = append(spec.env, k+"="+v)
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
	argv := append(append([]string(nil), spec.shim...), spec.argv...)
	k := &kernelProc{spec: spec, marker: newNonce(), cmdW: cmdW, msgs: make(chan driverMsg, 256), syncs: make(chan struct{}, 2), exited: make(chan struct{}), log: log}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = spec.dir
	cmd.Env = append(append(append([]string(nil), spec.env...), kernelMarkerEnv+"="+k.marker), spec.extraEnv...)
	cmd.ExtraFiles = []*os.File{cmdR, evW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	k.cmd = cmd
	outR, err := cmd.StdoutPipe()
	if err == nil {
		var errR io.ReadCloser
		if errR, err = cmd.StderrPipe(); err == nil {
			if err = cmd.Start(); err == nil {
				cmdR.Close()
				evW.Close()
				k.root = cmd.Process.Pid
				if spec.shim == nil {
					demote(k.root) // the shim demotes itself before it starts the interpreter
				}
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
	return nil, errdefs.Wrap(errdefs.CodeInterpreterMissing, err, "could not start "+spec.lang).With("interpreter", argv[0])
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
func (k *kernelProc) awaitReady(ctx context.Context) error {
	t := time.NewTimer(k.spec.startTimeout)
	defer t.Stop()
	select {
	case m, ok := <-k.msgs:
		if ok && m.Type == "ready" && m.PID > 0 {
			k.mu.Lock()
			k.stderr = nil
			k.pid = m.PID
			k.nonce = newNonce() // between commands, no line matches
			k.mu.Unlock()
			return nil
		}
		<-k.exited
		time.Sleep(20 * time.Millisecond) // let the stderr reader take the last bytes
		k.mu.Lock()
		msg := strings.TrimSpace(string(k.stderr))
		k.mu.Unlock()
		return k.spec.startErr(msg)
	case <-t.C:
		return errdefs.Newf(errdefs.CodeInterpreterStartTimeout, "the %s kernel did not start within %s (the sandbox may be overloaded; try again)", k.spec.lang, k.spec.startTimeout).
			With("interpreter", k.spec.lang).With("timeout", k.spec.startTimeout.String())
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readEvents turns the driver's event descriptor into messages: until ready, only the ready
// event; after it, only lines of the command in progress (its nonce). A line past
// maxEventLine is skipped and reported to the run as a stderr notice.
func (k *kernelProc) readEvents(r *os.File) {
	defer close(k.msgs)
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := readLine(br, maxEventLine)
		if errors.Is(err, errLineTooLong) {
			k.mu.Lock()
			nonce := k.nonce
			k.mu.Unlock()
			k.log.Warn("interp: an event line from the driver exceeds the limit: dropped", "lang", k.spec.lang, "limit", maxEventLine)
			k.msgs <- driverMsg{Nonce: nonce, Type: EventStderr, Text: fmt.Sprintf("hutch: an output of the interpreter was too large (over %d MiB in one event) and was dropped\n", maxEventLine>>20)}
			err = skipLine(br)
		} else if m, ok := k.parse(line); ok {
			k.msgs <- m
		}
		if err != nil {
			return
		}
	}
}

// parse decodes an event line, keeping it only if it belongs to the command in progress.
func (k *kernelProc) parse(line []byte) (driverMsg, bool) {
	if len(bytes.TrimSpace(line)) == 0 {
		return driverMsg{}, false
	}
	k.mu.Lock()
	nonce := k.nonce
	k.mu.Unlock()
	var m driverMsg
	if nonce == "" {
		// Before ready no user code ran: the line is the driver's (ready, or nothing).
		if json.Unmarshal(line, &m) == nil && m.Type == "ready" {
			return m, true
		}
		return driverMsg{}, false
	}
	// The driver's line starts with its nonce; user code may have left half a line before it.
	if i := bytes.LastIndex(line, []byte(`{"n":"`+nonce+`"`)); i >= 0 {
		if json.Unmarshal(line[i:], &m) == nil && m.Nonce == nonce {
			return m, true
		}
	}
	k.mu.Lock()
	k.dropped++
	n := k.dropped
	k.mu.Unlock()
	if n&(n-1) == 0 { // 1, 2, 4, 8, …: no log flood
		k.log.Warn("interp: dropped event lines that are not the driver's (written by user code?)", "lang", k.spec.lang, "dropped", n)
	}
	return driverMsg{}, false
}

// readOutput forwards what child processes write to the driver's fd 1 or 2 as events of typ,
// and notices the end-of-run marker of the run in progress.
func (k *kernelProc) readOutput(r io.Reader, typ string) {
	buf := make([]byte, 32<<10)
	var pending []byte
	for {
		n, err := r.Read(buf)
		pending = append(pending, buf[:n]...)
		k.mu.Lock()
		marker := []byte(syncMarker(k.nonce))
		k.mu.Unlock()
		for {
			i := bytes.Index(pending, marker)
			if i < 0 {
				break
			}
			k.out(typ, pending[:i])
			pending = pending[i+len(marker):]
			select { // never blocks: Run waits for at most two
			case k.syncs <- struct{}{}:
			default:
			}
		}
		if err != nil {
			k.out(typ, pending)
			return
		}
		// Hold back a possible start of the marker and an incomplete UTF-8 sequence.
		keep := 0
		for j := min(len(marker)-1, len(pending)); j > 0; j-- {
			if bytes.HasSuffix(pending, marker[:j]) {
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
func (k *kernelProc) out(typ string, p []byte) {
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

// send starts a command: a new nonce, then the command line (with it) to the driver. runMu
// held.
func (k *kernelProc) send(cmd map[string]any) error {
	nonce := newNonce()
	k.mu.Lock()
	k.nonce = nonce
	k.mu.Unlock()
	for len(k.syncs) > 0 {
		<-k.syncs
	}
	// Events of the previous command that came after its end (a background thread's output)
	// are not this command's.
	for drained := false; !drained; {
		select {
		case _, ok := <-k.msgs:
			drained = !ok
		default:
			drained = true
		}
	}
	cmd["n"] = nonce
	b, err := json.Marshal(cmd)
	if err != nil {
		return fmt.Errorf("interp: encode command: %w", err)
	}
	if _, err := k.cmdW.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("interp: the %s kernel is gone: %w", k.spec.lang, err)
	}
	return nil
}

// configure implements Configurer for both drivers: cwd and env applied in the driver.
// Errors: INVALID_PATH, VALIDATION_FAILED, or the kernel's failure.
func (k *kernelProc) configure(ctx context.Context, cwd string, env map[string]string) error {
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
				return fmt.Errorf("interp: the %s kernel exited while being configured", k.spec.lang)
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

// exec runs code in the driver, emitting its events, until the driver's done event. Results
// carry count, or the driver's count when count < 0. It returns the count (the driver's done
// count when count < 0).
func (k *kernelProc) exec(code string, count int, emit func(Event)) (int, error) {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return 0, fmt.Errorf("interp: the %s kernel is closed", k.spec.lang)
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
		n := count
		if n < 0 && m.Count != nil {
			n = *m.Count
		}
		switch m.Type {
		case EventStdout, EventStderr:
			emit(Event{Type: m.Type, Text: m.Text})
		case EventResult:
			emit(Event{Type: EventResult, Data: m.Data, ExecutionCount: max(n, 0)})
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
			return max(n, 0), nil
		}
	}
	return 0, fmt.Errorf("interp: the %s kernel exited", k.spec.lang)
}

// Interrupt implements Kernel: SIGINT to the interpreter while a run is in progress (to its
// main thread when spec.mainThread: where Python runs its handlers and where a blocking call
// must see EINTR).
//
// The signal is sent with k.mu held, so never after exec marked the run over: a late SIGINT
// cannot reach the next run. (The drivers drop a SIGINT that arrives outside user code.)
func (k *kernelProc) Interrupt() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	running, closed, pid := k.running, k.closed, k.pid
	if !running || closed || pid <= 0 {
		return nil
	}
	var err error
	if k.spec.mainThread {
		err = unix.Tgkill(pid, pid, unix.SIGINT)
	} else {
		err = unix.Kill(pid, unix.SIGINT)
	}
	if err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("interp: interrupt: %w", err)
	}
	return nil
}

// Exited implements Kernel.
func (k *kernelProc) Exited() bool {
	select {
	case <-k.exited:
		return true
	default:
		return false
	}
}

// Close implements Kernel: kills the kernel's whole tree (killKernel), then waits (at most
// 5 s) for the started process to be reaped.
func (k *kernelProc) Close() error {
	k.mu.Lock()
	k.closed = true
	pid := k.pid
	k.mu.Unlock()
	root := k.root
	if k.Exited() {
		root = 0 // reaped: the PID may be another process's now
	}
	killKernel(root, pid, k.marker)
	k.cmdW.Close()
	select {
	case <-k.exited:
	case <-time.After(5 * time.Second):
		return fmt.Errorf("interp: %s kernel %d did not exit", k.spec.lang, k.root)
	}
	return nil
}

// killBudget bounds one killKernel.
const killBudget = 30 * time.Second

// killKernel kills everything a kernel started. root is the process the agent started and has
// not reaped yet (0 once reaped: its PID may be reused): the subreaper shim, under which every
// orphan of the kernel's tree is reparented to the shim whatever setsid and double forks it
// did, or the interpreter itself. pid is the interpreter (trusted only while it is root or
// root's child).
//
//  1. The interpreter and every process below root, and every member of root's and the
//     interpreter's sessions, are SIGSTOPped, pass after pass, until none runs: a stopped
//     process cannot fork, so even a fork bomb stops growing.
//  2. All of them are SIGKILLed, repeatedly, until none is left; then the interpreter, then
//     root.
//  3. Every process whose environment still carries kernelMarkerEnv=marker is SIGKILLed: one
//     that left the tree (user code killed the shim, or the interpreter exited before and its
//     orphans went to PID 1) but kept the environment it inherited.
//
// A process that both left the tree and cleared its environment is not found; a cgroup per
// context would find it, but the agent cannot create cgroups inside the sandbox.
func killKernel(root, pid int, marker string) {
	deadline := time.Now().Add(killBudget)
	for stop := true; root > 0 && time.Now().Before(deadline); {
		procs, interp := kernelProcs(root, pid)
		if stop {
			running := 0
			for _, p := range append(procs, interp...) {
				if p.State != 'T' && p.State != 't' {
					running++
					_ = unix.Kill(p.Pid, unix.SIGSTOP)
				}
			}
			stop = running > 0
			continue
		}
		if len(procs) == 0 {
			for _, p := range interp {
				_ = unix.Kill(p.Pid, unix.SIGKILL)
			}
			_ = unix.Kill(root, unix.SIGKILL)
			break
		}
		for _, p := range procs {
			_ = unix.Kill(p.Pid, unix.SIGKILL)
		}
		time.Sleep(time.Millisecond)
	}
	for time.Now().Before(deadline) {
		pids := session.FindMarked(kernelMarkerEnv, marker)
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			_ = unix.Kill(p, unix.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kernelProcs returns the live processes below root and the members of root's and the
// interpreter's sessions (root and the interpreter left out), and the interpreter itself
// (when pid is root's child).
func kernelProcs(root, pid int) (procs, interp []session.ProcStat) {
	all := session.ScanProcs()
	children := map[int][]int{}
	byPid := map[int]session.ProcStat{}
	for _, p := range all {
		children[p.Ppid] = append(children[p.Ppid], p.Pid)
		byPid[p.Pid] = p
	}
	if p, ok := byPid[pid]; !ok || pid == root || p.Ppid != root {
		pid = 0
	} else {
		interp = append(interp, p)
	}
	queue := append([]int(nil), children[root]...)
	for _, p := range all {
		if p.Sid == root || (pid > 0 && p.Sid == pid) {
			queue = append(queue, p.Pid)
		}
	}
	seen := map[int]bool{root: true, pid: true}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == pid {
			queue = append(queue, children[p]...) // its children are ours; itself is killed last
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		if st, ok := byPid[p]; ok {
			procs = append(procs, st)
		}
		queue = append(queue, children[p]...)
	}
	return procs, interp
}

// validateKernelEnv checks env names and sizes (envlimit). Errors: VALIDATION_FAILED.
func validateKernelEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return errdefs.Newf(errdefs.CodeInvalidArgument, "invalid environment variable %q", k).With("name", k)
		}
	}
	return envlimit.Check("envVars", env)
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
