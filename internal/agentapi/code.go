package agentapi

import "time"

// Code contexts and runs (/api/contexts/..., POST /api/run-code).

// CodeContext describes a code context: the reply of context create (201) and get.
type CodeContext struct {
	ID        string    `json:"id"`
	Language  string    `json:"language"`
	Cwd       string    `json:"cwd"`
	CreatedAt time.Time `json:"createdAt"`
}

// ContextCreateRequest is the body of POST /api/contexts.
type ContextCreateRequest struct {
	Language string            `json:"language"` // "python" (default), "javascript", "typescript"
	Cwd      string            `json:"cwd"`      // absolute, or relative to the workdir; default the workdir
	EnvVars  map[string]string `json:"envVars"`
}

// ContextListReply is the reply of GET /api/contexts, oldest first.
type ContextListReply struct {
	Contexts []CodeContext `json:"contexts"`
}

// ContextReply is the reply of a context's delete and interrupt.
type ContextReply struct {
	Success bool   `json:"success"`
	ID      string `json:"id"`
}

// RunRequest is the body of POST /api/contexts/{cid}/run and (with Language, Cwd, EnvVars)
// POST /api/run-code. timeout_ms and its alias timeoutMs bound the run (timeout_ms wins).
type RunRequest struct {
	Code      string            `json:"code"`
	TimeoutMs int64             `json:"timeout_ms"`
	Timeout   int64             `json:"timeoutMs"` // alias of timeout_ms
	Language  string            `json:"language"`
	Cwd       string            `json:"cwd"`
	EnvVars   map[string]string `json:"envVars"`
}

// CodeError is a run's error (Python's exception name, value and traceback).
type CodeError struct {
	Name      string   `json:"name"`
	Value     string   `json:"value"`
	Traceback []string `json:"traceback"`
}

// Events of a run's stream. A "result" event is an object of the result's MIME fields (text,
// html, png, jpeg, svg, json, markdown, latex, javascript) with type and executionCount: its
// keys depend on the result, so it has no struct.

// CodeOutputEvent is a "stdout" or "stderr" event of a run.
type CodeOutputEvent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// CodeErrorEvent is the "error" event of a run that raised.
type CodeErrorEvent struct {
	Type string `json:"type"` // "error"
	CodeError
}

// CodeFailedEvent is the "error" event of a run that could not run (its context went away):
// CodeError with the errdefs code.
type CodeFailedEvent struct {
	Type string `json:"type"` // "error"
	CodeError
	Code string `json:"code"`
}

// CodeCompleteEvent is the last event of a run that ended.
type CodeCompleteEvent struct {
	Type           string `json:"type"` // "execution_complete"
	ExecutionCount int    `json:"executionCount"`
}

// CodeBufferedReply is the reply of a run with ?buffered=1: the results' MIME fields, the
// output, the error (null when none).
type CodeBufferedReply struct {
	Results        []map[string]any `json:"results"`
	Logs           CodeLogs         `json:"logs"`
	Error          *CodeError       `json:"error"`
	ExecutionCount int              `json:"executionCount"`
}

// CodeLogs is a buffered run's output, as the texts the interpreter sent.
type CodeLogs struct {
	Stdout []string `json:"stdout"`
	Stderr []string `json:"stderr"`
}
