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

	"github.com/evanw/esbuild/pkg/api"
	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
)

// jsDriver is the program each JavaScript kernel runs: a function expression that node
// evaluates (see jsBootstrap) and calls with its require. It reads commands as JSON lines on
// fd 3 and writes events as JSON lines on fd 4.
//
//go:embed js_driver.js
var jsDriver string

// jsBootstrap is node's -e program: it takes the driver from the environment (so the command
// line stays short in ps), removes it from process.env and runs it. Its own binding is
// block-scoped, so it leaves no global name behind.
const jsBootstrap = `{const s=process.env.HUTCH_JS_DRIVER;delete process.env.HUTCH_JS_DRIVER;require('vm').runInThisContext(s,{filename:'hutch-js-driver.js'})(require)}`

// jsSync is written by the driver to its fd 1 and fd 2 at the end of every run (same role as
// pythonSync: the output child processes wrote before it has been forwarded).
const jsSync = "\x00\x1bhutch-sync\x00"

// jsStartTimeout bounds the start of a node kernel.
const jsStartTimeout = 30 * time.Second

// JSConfig configures NewJavaScriptFactory and NewTypeScriptFactory.
type JSConfig struct {
	// Node is the node binary (a name looked up in PATH, or a path); "" means "node".
	Node string
	// Workdir is the default cwd of kernels (absolute).
	Workdir string
	// Env is the base environment ("KEY=value"), usually the sandbox's.
	Env []string
	// Logger receives diagnostics; nil means slog.Default().
	Logger *slog.Logger
}

// NewJavaScriptFactory returns the factory of "javascript" kernels: one long-lived `node`
// process each (node 18 or later), in its own session (setsid). Top-level declarations persist
// between runs, top-level await works, the last expression's value is the result
// (text/plain by util.inspect, plus application/json for objects and arrays that
// JSON.stringify accepts). Factory errors: INVALID_PATH (cwd is not a directory),
// VALIDATION_FAILED (a bad env name), INTERPRETER_NOT_AVAILABLE (node missing or died
// while starting).
func NewJavaScriptFactory(cfg JSConfig) KernelFactory {
	return newJSFactory(cfg, false)
}

// NewTypeScriptFactory returns the factory of "typescript" kernels: JavaScript kernels whose
// code is first transpiled with esbuild (loader ts, target node18; types are erased, not
// checked). A transpile error ends the run with an error event named "SyntaxError" whose
// value is esbuild's message. Factory errors: as NewJavaScriptFactory.
func NewTypeScriptFactory(cfg JSConfig) KernelFactory {
	return newJSFactory(cfg, true)
}

func newJSFactory(cfg JSConfig, ts bool) KernelFactory {
	if cfg.Node == "" {
		cfg.Node = "node"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return func(ctx context.Context, cwd string, env map[string]string) (Kernel, error) {
		return startJS(ctx, cfg, ts, cwd, env)
	}
}

// jsMsg is one event line from the driver.
type jsMsg struct {
	Type      string         `json:"type"`
	Text      string         `json:"text"`
	Data      map[string]any `json:"data"`
	Name      string         `json:"name"`
	Value     string         `json:"value"`
	Traceback []string       `json:"traceback"`
	PID       int            `json:"pid"`
}

// jsKernel is a running node driver.
type jsKernel struct {
	ts     bool
	cmd    *exec.Cmd
	pid    int
	cmdW   *os.File   // the driver's fd 3
	msgs   chan jsMsg // events from fd 4; closed when the driver's fd 4 ends
	syncs  chan struct{}
	exited chan struct{} // closed when the process has been waited for
	log    *slog.Logger

	mu      sync.Mutex
	emit    func(Event) // guarded by mu; the run in progress, or nil
	running bool        // guarded by mu
	closed  bool        // guarded by mu
	stderr  []byte      // guarded by mu; kept while starting, for the error message

	runMu sync.Mutex // one Run or Configure at a time
	count int        // guarded by runMu; the execution count
}

func startJS(ctx context.Context, cfg JSConfig, ts bool, cwd string, env map[string]string) (*jsKernel, error) {
	if err := validateKernelEnv(env); err != nil {
		return nil, err
	}
	if err := checkCwd(cwd); err != nil {
		return nil, err
	}
	bin, err := exec.LookPath(cfg.Node)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.CodeInterpreterMissing, err, "node is not installed in the sandbox image").With("interpreter", cfg.Node)
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
	cmd := exec.Command(bin, "-e", jsBootstrap)
	cmd.Dir = cwd
	cmd.Env = append([]string(nil), cfg.Env...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "HUTCH_JS_DRIVER="+jsDriver)
	cmd.ExtraFiles = []*os.File{cmdR, evW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	outR, err := cmd.StdoutPipe()
	if err == nil {
		var errR io.ReadCloser
		if errR, err = cmd.StderrPipe(); err == nil {
			k := &jsKernel{ts: ts, cmd: cmd, cmdW: cmdW, msgs: make(chan jsMsg, 256), syncs: make(chan struct{}, 4), exited: make(chan struct{}), log: cfg.Logger}
			if err = cmd.Start(); err == nil {
				cmdR.Close()
				evW.Close()
				k.pid = cmd.Process.Pid
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
	return nil, errdefs.Wrap(errdefs.CodeInterpreterMissing, err, "could not start node").With("interpreter", bin)
}

// awaitReady waits for the driver's ready event.
func (k *jsKernel) awaitReady(ctx context.Context) error {
	t := time.NewTimer(jsStartTimeout)
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
		return errdefs.Newf(errdefs.CodeInterpreterMissing, "the JavaScript kernel exited while starting: %s", msg).With("interpreter", "node")
	case <-t.C:
		return errdefs.Newf(errdefs.CodeInterpreterMissing, "the JavaScript kernel did not start within %s", jsStartTimeout).With("interpreter", "node")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readEvents turns the driver's fd 4 into messages.
func (k *jsKernel) readEvents(r *os.File) {
	defer close(k.msgs)
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := readLine(br, maxEventLine)
		if errors.Is(err, errLineTooLong) {
			// Code in the kernel wrote an endless line to the event descriptor: the kernel is
			// unusable; its exit (msgs closed) ends the run and it is restarted.
			k.log.Warn("interp: an event line from the node driver exceeds the limit: closing it", "limit", maxEventLine)
			return
		}
		if len(bytes.TrimSpace(line)) > 0 {
			var m jsMsg
			if jerr := json.Unmarshal(line, &m); jerr != nil {
				k.log.Warn("interp: bad event from the node driver", "err", jerr)
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
func (k *jsKernel) readOutput(r io.Reader, typ string) {
	buf := make([]byte, 32<<10)
	var pending []byte
	for {
		n, err := r.Read(buf)
		pending = append(pending, buf[:n]...)
		for {
			i := bytes.Index(pending, []byte(jsSync))
			if i < 0 {
				break
			}
			k.out(typ, pending[:i])
			pending = pending[i+len(jsSync):]
			k.syncs <- struct{}{}
		}
		if err != nil {
			k.out(typ, pending)
			return
		}
		keep := 0
		for j := min(len(jsSync)-1, len(pending)); j > 0; j-- {
			if bytes.HasSuffix(pending, []byte(jsSync[:j])) {
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

// out sends child-process output to the run in progress; between runs it is kept while the
// kernel starts (for the error message) and dropped after.
func (k *jsKernel) out(typ string, p []byte) {
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
func (k *jsKernel) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("interp: encode command: %w", err)
	}
	if _, err := k.cmdW.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("interp: the node kernel is gone: %w", err)
	}
	return nil
}

// Configure implements Configurer: process.chdir and process.env in the driver (require then
// resolves from the new cwd). Errors: INVALID_PATH, VALIDATION_FAILED, or the kernel's failure.
func (k *jsKernel) Configure(ctx context.Context, cwd string, env map[string]string) error {
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
				return errors.New("interp: the node kernel exited while being configured")
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

// Run implements Kernel. TypeScript kernels transpile code first; a transpile error is the
// run's error event (name "SyntaxError"), the execution count still advances.
func (k *jsKernel) Run(ctx context.Context, code string, emit func(Event)) (int, error) {
	k.runMu.Lock()
	defer k.runMu.Unlock()
	for len(k.syncs) > 0 {
		<-k.syncs
	}
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return 0, errors.New("interp: the node kernel is closed")
	}
	k.mu.Unlock()
	k.count++
	count := k.count
	if k.ts {
		js, ev := transpileTS(code)
		if ev != nil {
			emit(*ev)
			return count, nil
		}
		code = js
	}
	k.mu.Lock()
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
		switch m.Type {
		case EventStdout, EventStderr:
			emit(Event{Type: m.Type, Text: m.Text})
		case EventResult:
			emit(Event{Type: EventResult, Data: m.Data, ExecutionCount: count})
		case EventError:
			emit(Event{Type: EventError, Name: m.Name, Value: m.Value, Traceback: m.Traceback})
		case "done":
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
	return 0, errors.New("interp: the node kernel exited")
}

// transpileTS turns TypeScript into JavaScript for the driver: CommonJS (so static imports
// become require calls), or the input's own module form when it has top-level await (which
// CommonJS cannot hold). It returns an error event for code esbuild rejects.
func transpileTS(code string) (string, *Event) {
	opts := api.TransformOptions{
		Loader:     api.LoaderTS,
		Format:     api.FormatCommonJS,
		Engines:    []api.Engine{{Name: api.EngineNode, Version: "18"}},
		Sourcefile: "cell.ts",
	}
	res := api.Transform(code, opts)
	if len(res.Errors) > 0 && hasTopLevelAwaitError(res.Errors) {
		opts.Format = api.FormatDefault
		res = api.Transform(code, opts)
	}
	if len(res.Errors) == 0 {
		return string(res.Code), nil
	}
	ev := &Event{Type: EventError, Name: "SyntaxError", Value: res.Errors[0].Text}
	for _, m := range res.Errors {
		line := m.Text
		if l := m.Location; l != nil {
			line = fmt.Sprintf("%s:%d:%d: %s", l.File, l.Line, l.Column+1, m.Text)
			ev.Traceback = append(ev.Traceback, line, "    "+l.LineText)
			continue
		}
		ev.Traceback = append(ev.Traceback, line)
	}
	return "", ev
}

// hasTopLevelAwaitError tells whether esbuild refused CommonJS output for top-level await.
func hasTopLevelAwaitError(msgs []api.Message) bool {
	for _, m := range msgs {
		if strings.Contains(m.Text, "Top-level await") {
			return true
		}
	}
	return false
}

// Interrupt implements Kernel: SIGINT to node while a run is in progress. Synchronous code is
// stopped by vm's breakOnSigint and awaiting code is abandoned (the driver stops waiting for
// it); either way the context keeps its state. Code that blocks node outside vm (an endless
// loop in a callback or after an await) does not stop: the Manager then restarts the kernel.
func (k *jsKernel) Interrupt() error {
	k.mu.Lock()
	running, closed := k.running, k.closed
	k.mu.Unlock()
	if !running || closed {
		return nil
	}
	if err := unix.Kill(k.pid, unix.SIGINT); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("interp: interrupt: %w", err)
	}
	return nil
}

// Exited implements Kernel.
func (k *jsKernel) Exited() bool {
	select {
	case <-k.exited:
		return true
	default:
		return false
	}
}

// Close implements Kernel: SIGKILL to node, its session and its descendants, then waits (at
// most 5 s) for it to be reaped.
func (k *jsKernel) Close() error {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	killTree(k.pid)
	k.cmdW.Close()
	select {
	case <-k.exited:
	case <-time.After(5 * time.Second):
		return fmt.Errorf("interp: node kernel %d did not exit", k.pid)
	}
	return nil
}
