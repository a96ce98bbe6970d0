package interp

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/evanw/esbuild/pkg/api"
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
	// Shim is the argv prefix the kernel is started under (hutch-init's `shim --fds 2 --`,
	// a child subreaper); nil starts the interpreter directly.
	Shim []string
}

// NewJavaScriptFactory returns the factory of "javascript" kernels: one long-lived `node`
// process each (node 18 or later), in its own session (setsid). Top-level declarations persist
// between runs, top-level await works, the last expression's value is the result
// (text/plain by util.inspect, plus application/json for objects and arrays that
// JSON.stringify accepts). Factory errors: INVALID_PATH (cwd is not a directory),
// VALIDATION_FAILED (a bad env name), INTERPRETER_NOT_AVAILABLE (node missing or died
// while starting), INTERPRETER_START_TIMEOUT (not ready within 30 s).
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

// jsKernel is a running node driver.
type jsKernel struct {
	*kernelProc
	ts    bool
	count int // guarded by runMu; the execution count
}

func startJS(ctx context.Context, cfg JSConfig, ts bool, cwd string, env map[string]string) (*jsKernel, error) {
	bin, cwd, err := prepareStart(cfg.Node, "node", cwd, cfg.Workdir, env)
	if err != nil {
		return nil, err
	}
	spec := procSpec{
		lang:         "node",
		argv:         []string{bin, "-e", jsBootstrap},
		dir:          cwd,
		env:          append([]string(nil), cfg.Env...),
		extraEnv:     []string{"HUTCH_JS_DRIVER=" + jsDriver},
		shim:         cfg.Shim,
		startTimeout: jsStartTimeout,
		startErr: func(stderr string) error {
			return errdefs.Newf(errdefs.CodeInterpreterMissing, "the JavaScript kernel exited while starting: %s", stderr).With("interpreter", "node")
		},
	}
	p, err := startProc(ctx, spec, env, cfg.Logger)
	if err != nil {
		return nil, err
	}
	return &jsKernel{kernelProc: p, ts: ts}, nil
}

// Configure implements Configurer: process.chdir and process.env in the driver (require then
// resolves from the new cwd). Errors: INVALID_PATH, VALIDATION_FAILED, or the kernel's failure.
func (k *jsKernel) Configure(ctx context.Context, cwd string, env map[string]string) error {
	return k.configure(ctx, cwd, env)
}

// Run implements Kernel. TypeScript kernels transpile code first; a transpile error is the
// run's error event (name "SyntaxError"), the execution count still advances.
func (k *jsKernel) Run(ctx context.Context, code string, emit func(Event)) (int, error) {
	k.runMu.Lock()
	defer k.runMu.Unlock()
	k.mu.Lock()
	closed := k.closed
	k.mu.Unlock()
	if closed {
		return 0, errors.New("interp: the node kernel is closed")
	}
	k.count++
	if k.ts {
		js, ev := transpileTS(code)
		if ev != nil {
			emit(*ev)
			return k.count, nil
		}
		code = js
	}
	return k.exec(code, k.count, emit)
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
