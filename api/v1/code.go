package v1

import (
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// Code interpreter languages (CreateCodeContextRequest.Language), as the reference system's
// createCodeContext().
const (
	LanguagePython     = "python"
	LanguageJavaScript = "javascript"
	LanguageTypeScript = "typescript"
)

// CreateCodeContextRequest is the body of POST /v1/sandboxes/{id}/contexts: start a
// persistent interpreter. Language defaults to python; Cwd (absolute, or relative to the
// sandbox's workdir, the default) must exist; EnvVars are added to the sandbox's environment.
// Errors: 400 INVALID_LANGUAGE, INVALID_PATH, VALIDATION_FAILED; 429 CONTEXT_LIMIT_EXCEEDED;
// 503 INTERPRETER_NOT_AVAILABLE, INTERPRETER_START_TIMEOUT.
type CreateCodeContextRequest struct {
	Language string            `json:"language,omitempty"`
	Cwd      string            `json:"cwd,omitempty"`
	EnvVars  map[string]string `json:"envVars,omitempty"`
}

// CodeContext is a persistent interpreter: variables, imports and definitions survive
// between runs. It is the reply of contexts (create) and getCodeContext. Unknown → 404
// CONTEXT_NOT_FOUND.
type CodeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	// Cwd is absolute.
	Cwd       string    `json:"cwd"`
	CreatedAt time.Time `json:"createdAt"`
}

// CodeContextList is the reply of GET contexts, oldest first.
type CodeContextList struct {
	Contexts []CodeContext `json:"contexts"`
}

// CodeContextResult is the reply of DELETE contexts/{cid} and of contexts/{cid}/interrupt.
type CodeContextResult struct {
	Success bool   `json:"success"`
	ID      string `json:"id"`
}

// RunCodeRequest is the body of POST contexts/{cid}/run and of run-code (a fresh context of
// Language, Cwd and EnvVars, deleted after the run). TimeoutMs interrupts the run after that
// many milliseconds (0: none); it then ends with a CodeError named TimeoutError. The reply is
// an SSE stream of CodeEvent frames, or with ?buffered=1 one CodeExecution.
type RunCodeRequest struct {
	Code string `json:"code"`
	// TimeoutMs is sent as timeout_ms, the reference system's name; the agent also reads
	// timeoutMs.
	TimeoutMs int64             `json:"timeout_ms,omitempty"`
	Language  string            `json:"language,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	EnvVars   map[string]string `json:"envVars,omitempty"`
}

// CodeResult is one rich output of a run (a displayed value, a display() call, a figure),
// one field per MIME type it has.
type CodeResult struct {
	Text       string `json:"text,omitempty"`       // text/plain
	HTML       string `json:"html,omitempty"`       // text/html (e.g. a pandas DataFrame)
	PNG        []byte `json:"png,omitempty"`        // image/png, base64 in JSON
	JPEG       []byte `json:"jpeg,omitempty"`       // image/jpeg, base64 in JSON
	SVG        string `json:"svg,omitempty"`        // image/svg+xml
	Markdown   string `json:"markdown,omitempty"`   // text/markdown
	LaTeX      string `json:"latex,omitempty"`      // text/latex
	JavaScript string `json:"javascript,omitempty"` // application/javascript
	// JSON is application/json, decoded.
	JSON any `json:"json,omitempty"`
	// ExecutionCount is the run's execution count (streamed results only).
	ExecutionCount int `json:"executionCount,omitempty"`
}

// CodeError is the exception a run ended with: TimeoutError when TimeoutMs expired,
// KeyboardInterrupt after an interrupt in Python, KernelError when the interpreter died (it is
// restarted and the context's state is lost). Traceback lines carry no ANSI escapes.
type CodeError struct {
	Name      string   `json:"name"`
	Value     string   `json:"value"`
	Traceback []string `json:"traceback"`
}

// CodeLogs are a run's printed output, in chunks in the order printed.
type CodeLogs struct {
	Stdout []string `json:"stdout"`
	Stderr []string `json:"stderr"`
}

// CodeExecution is the buffered (?buffered=1) outcome of a run; Error is nil when the run
// completed.
type CodeExecution struct {
	Results        []CodeResult `json:"results"`
	Logs           CodeLogs     `json:"logs"`
	Error          *CodeError   `json:"error"`
	ExecutionCount int          `json:"executionCount"`
}

// Code event types (CodeEvent.Type).
const (
	CodeEventStdout   = "stdout"
	CodeEventStderr   = "stderr"
	CodeEventResult   = "result"
	CodeEventError    = "error"
	CodeEventComplete = "execution_complete"
)

// CodeEvent is one SSE frame of a streamed run: "stdout"/"stderr" (Text), "result" (the
// CodeResult fields), then exactly one of "execution_complete" (ExecutionCount) or "error":
// the code's exception (Name, Value, Traceback), or a failure of the call (Code, the errdefs
// code, and Value its message): CONTEXT_NOT_FOUND (Name "ContextNotFound"), or
// SANDBOX_NOT_FOUND (Name "SandboxDestroyed") when a destroy of the sandbox cut the run.
type CodeEvent struct {
	CodeResult
	Type      string       `json:"type"`
	Name      string       `json:"name,omitempty"`
	Value     string       `json:"value,omitempty"`
	Traceback []string     `json:"traceback,omitempty"`
	Code      errdefs.Code `json:"code,omitempty"`
}
