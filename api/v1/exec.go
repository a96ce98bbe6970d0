package v1

import (
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// Kill reasons: why a command or process killed by SIGKILL (exit 137) died, when the sandbox
// knows (ExecResult.Reason, ExecEvent.Reason, Process.Reason).
const (
	// ReasonOOMKilled: the memory limit's OOM killer ended it (the sandbox's oom_kill counter
	// rose while it ran; on gVisor the agent's OOM enforcer or hutchd's memory guard).
	ReasonOOMKilled = "oom-killed"
	// ReasonProcessLimit: on gVisor, hutchd's guard killed it for a sandbox near its process
	// limit.
	ReasonProcessLimit = "process-limit"
	// ReasonCPUStarved: on gVisor, hutchd's guard killed busy processes that kept the agent
	// from answering.
	ReasonCPUStarved = "cpu-starved"
)

// Output encodings of ExecResult, ExecEvent, ProcessLogs and process events.
const (
	// EncodingBase64: stdout and stderr (or data) are standard base64, because one of them is
	// not valid UTF-8. Absent: UTF-8 text.
	EncodingBase64 = "base64"
)

// ExecRequest is the body of POST /v1/sandboxes/{id}/execute and execute/stream: a bash
// command line run with bash -c in the session's cwd and exported environment (the reference
// system's exec(); the session's state changes persist, as in its sessions).
//
// Errors: 400 INVALID_COMMAND (empty), VALIDATION_FAILED (bad stdinBase64, env sizes);
// 408 COMMAND_TIMEOUT (the envelope's context holds the partial stdout and stderr).
type ExecRequest struct {
	Command string `json:"command"`
	// SessionID selects the session; absent means "default"; an unknown one is created.
	SessionID string `json:"sessionId,omitempty"`
	// TimeoutMs > 0 kills the whole process tree on expiry; 0 or absent: no limit.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// Env is added for this command only.
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the working directory of this command only.
	Cwd string `json:"cwd,omitempty"`
	// Stdin (text) or StdinBase64 (exact bytes) is the standard input; with neither it is
	// /dev/null.
	Stdin       *string `json:"stdin,omitempty"`
	StdinBase64 *string `json:"stdinBase64,omitempty"`
}

// ExecResult is the reply of execute: the command ran to its end (a non-zero exit code is
// not an error).
type ExecResult struct {
	Success bool `json:"success"`
	// ExitCode follows the shell: 128+N for death by signal N (137 = SIGKILL).
	ExitCode int `json:"exitCode"`
	// Stdout and Stderr are the exact output, both base64 when Encoding is EncodingBase64.
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	Encoding string `json:"encoding,omitempty"`
	// Truncated: stdout or stderr passed 16 MiB and was cut there (the command still ran to
	// its end); use execute/stream for large output.
	Truncated bool `json:"truncated,omitempty"`
	// Reason is one of the Reason constants, or absent.
	Reason  string `json:"reason,omitempty"`
	Command string `json:"command"`
	// Duration is the run time in milliseconds.
	Duration  int64     `json:"duration"`
	SessionID string    `json:"sessionId"`
	Timestamp time.Time `json:"timestamp"`
}

// Exec event types (ExecEvent.Type).
const (
	ExecEventStart    = "start"
	ExecEventStdout   = "stdout"
	ExecEventStderr   = "stderr"
	ExecEventComplete = "complete"
	ExecEventError    = "error"
)

// ExecEvent is one SSE frame of execute/stream, in the reference system's framing: "start"
// {command, pid, sessionId}; then "stdout"/"stderr" {data, encoding?} chunks of at most
// 64 KiB of source bytes (UTF-8 never split, base64 when not UTF-8); then exactly one of
// "complete" {exitCode, duration, reason?} or "error" {code, error, context?}. Every frame
// has a timestamp. The fields of the other types are absent.
type ExecEvent struct {
	Type      string `json:"type"`
	Command   string `json:"command,omitempty"`
	PID       int    `json:"pid,omitempty"`
	SessionID string `json:"sessionId,omitempty"`
	Data      string `json:"data,omitempty"`
	Encoding  string `json:"encoding,omitempty"`
	// ExitCode is set on "complete" (nil on the other types).
	ExitCode *int   `json:"exitCode,omitempty"`
	Duration int64  `json:"duration,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Code, Error and Context are set on "error".
	Code      errdefs.Code   `json:"code,omitempty"`
	Error     string         `json:"error,omitempty"`
	Context   map[string]any `json:"context,omitempty"`
	Timestamp time.Time      `json:"timestamp"`
}
