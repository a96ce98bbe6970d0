package interp

import (
	"context"
	_ "embed"
	"log/slog"
	"strings"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// pythonDriver is the program each Python kernel runs (python3 -u -c), speaking the driver
// protocol (kernel_proc.go) and running code in IPython's InteractiveShell.
//
//go:embed python_driver.py
var pythonDriver string

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
	// Shim is the argv prefix the kernel is started under (hutch-init's `shim --fds 2 --`,
	// a child subreaper); nil starts the interpreter directly.
	Shim []string
}

// NewPythonFactory returns the factory of "python" kernels: one `python3 -u` process each, in
// its own session (setsid), at nice 19 and oom_score_adj 500 like other commands, running
// IPython. Factory errors: INVALID_PATH (cwd is not a
// directory), VALIDATION_FAILED (a bad env name), INTERPRETER_NOT_AVAILABLE (python3 or
// IPython missing, or the interpreter died while starting; the message says which),
// INTERPRETER_START_TIMEOUT (not ready within 60 s).
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

// pythonKernel is a running Python driver.
type pythonKernel struct {
	*kernelProc
}

func startPython(ctx context.Context, cfg PythonConfig, cwd string, env map[string]string) (*pythonKernel, error) {
	bin, cwd, err := prepareStart(cfg.Python, "python3", cwd, cfg.Workdir, env)
	if err != nil {
		return nil, err
	}
	spec := procSpec{
		lang:         "python",
		argv:         []string{bin, "-u", "-c", pythonDriver},
		dir:          cwd,
		env:          append(append([]string(nil), cfg.Env...), "PYTHONUNBUFFERED=1", "MPLBACKEND=Agg", "PYTHONIOENCODING=utf-8"),
		shim:         cfg.Shim,
		startTimeout: pythonStartTimeout,
		mainThread:   true,
		startErr:     pythonStartErr,
	}
	p, err := startProc(ctx, spec, env, cfg.Logger)
	if err != nil {
		return nil, err
	}
	return &pythonKernel{p}, nil
}

// pythonStartErr is the error for a Python driver that died while starting, from its stderr.
func pythonStartErr(stderr string) error {
	if i := strings.LastIndexByte(stderr, '\n'); i >= 0 {
		stderr = stderr[i+1:] // the exception line, e.g. "ModuleNotFoundError: No module named 'IPython'"
	}
	if strings.Contains(stderr, "No module named 'IPython'") {
		return errdefs.New(errdefs.CodeInterpreterMissing, "IPython is not installed in the sandbox image (the Python kernel needs ipython3)").With("interpreter", "ipython3")
	}
	return errdefs.Newf(errdefs.CodeInterpreterMissing, "the Python kernel exited while starting: %s", stderr).With("interpreter", "python3")
}

// Configure implements Configurer: os.chdir and os.environ in the driver. Errors: INVALID_PATH,
// VALIDATION_FAILED, or the kernel's failure.
func (k *pythonKernel) Configure(ctx context.Context, cwd string, env map[string]string) error {
	return k.configure(ctx, cwd, env)
}

// Run implements Kernel; the execution count is IPython's.
func (k *pythonKernel) Run(ctx context.Context, code string, emit func(Event)) (int, error) {
	k.runMu.Lock()
	defer k.runMu.Unlock()
	return k.exec(code, -1, emit)
}
