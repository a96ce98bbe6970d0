// Package interp runs code contexts for hutch-init's code interpreter: each context is one
// long-lived interpreter process (a Kernel) of one language, kept by a Manager that serialises
// runs per context, enforces timeouts (interrupting the kernel) and keeps a small pool of
// pre-started kernels per language so that creating a context is fast.
package interp

import (
	"bufio"
	"context"
	"errors"
)

// Event types.
const (
	EventStdout   = "stdout"             // Text: a chunk the code printed
	EventStderr   = "stderr"             // Text
	EventResult   = "result"             // Data: a MIME bundle; ExecutionCount
	EventError    = "error"              // Name, Value, Traceback; ends the run
	EventComplete = "execution_complete" // ExecutionCount; ends a run without error
)

// Event is one item of a run's stream.
type Event struct {
	Type string // EventStdout, EventStderr, EventResult, EventError or EventComplete
	// Text is a stdout/stderr chunk.
	Text string
	// Data is a result's MIME bundle: "text/plain", "text/html", "image/png" (base64),
	// "image/jpeg" (base64), "image/svg+xml", "application/json" (any JSON value),
	// "text/markdown", "text/latex", "application/javascript".
	Data map[string]any
	// Name, Value and Traceback (lines, no ANSI escapes) describe an error.
	Name, Value string
	Traceback   []string
	// ExecutionCount is the run's execution count (results and execution_complete).
	ExecutionCount int
}

// Kernel is one live interpreter process of one context. Run executes code, calling emit for
// every event as it happens (stdout/stderr chunks while the code runs) and returns once the
// execution is complete, with the execution count; kernels emit stdout, stderr, result and
// error events (the Manager adds execution_complete). An error return means the kernel itself
// failed (it died, its pipes broke), not the code. Interrupt stops the running execution
// (Python: KeyboardInterrupt, state kept). Close kills the process and its tree. Exited
// reports whether the process has ended.
type Kernel interface {
	Run(ctx context.Context, code string, emit func(Event)) (count int, err error)
	Interrupt() error
	Close() error
	Exited() bool
}

// Configurer is implemented by kernels that can take their cwd and environment after they
// started; the Manager pools only such kernels (started with the default cwd and env).
type Configurer interface {
	// Configure changes the kernel's working directory (if cwd is not empty) and sets the
	// env variables. An error leaves the kernel unusable.
	Configure(ctx context.Context, cwd string, env map[string]string) error
}

// KernelFactory starts a kernel for a language with cwd ("" means the default) and env
// (variables added to the sandbox environment).
type KernelFactory func(ctx context.Context, cwd string, env map[string]string) (Kernel, error)

// maxEventLine bounds one event line from a driver (a result with its images, in JSON): 64 MiB.
// Code that writes more to the event descriptor without a newline would otherwise make the
// agent hold it all in memory.
const maxEventLine = 64 << 20

// errLineTooLong is readLine's error for a line past its limit.
var errLineTooLong = errors.New("interp: line too long")

// readLine reads one '\n'-terminated line of at most limit bytes (the newline included); past
// the limit it returns errLineTooLong without holding more.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > limit {
			return nil, errLineTooLong
		}
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}

// skipLine discards the rest of a line (through its '\n').
func skipLine(br *bufio.Reader) error {
	for {
		_, err := br.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}
