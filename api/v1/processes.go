package v1

import (
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// ProcessStatus is a background process's state: "starting" or "running" until it ends; then
// exit 0 gives "completed", 137 or 143 (SIGKILL, SIGTERM) "killed", any other exit code
// "failed", and a process that could not start or whose agent died "error".
type ProcessStatus string

// Process states.
const (
	ProcessStarting  ProcessStatus = "starting"
	ProcessRunning   ProcessStatus = "running"
	ProcessCompleted ProcessStatus = "completed"
	ProcessFailed    ProcessStatus = "failed"
	ProcessKilled    ProcessStatus = "killed"
	ProcessError     ProcessStatus = "error"
)

// Done reports whether s is a final state (completed, failed, killed or error).
func (s ProcessStatus) Done() bool {
	switch s {
	case ProcessCompleted, ProcessFailed, ProcessKilled, ProcessError:
		return true
	}
	return false
}

// Process is a background process (the reference system's startProcess()). Process IDs are
// 1–128 characters of [A-Za-z0-9_.-], the first a letter, digit or _, not kill-all or list;
// default proc_<unix ms>_<6 random [a-z0-9]>. Records of finished processes and their logs
// are kept for hutchd's processRetention (default 1 h) on the sandbox's disk, across hutchd
// restarts and sandbox stop/start. Unknown → 404 PROCESS_NOT_FOUND.
type Process struct {
	ID string `json:"id"`
	// PID is the PID in the sandbox of the process the agent started (it leads the process
	// group); 0 if it never started.
	PID     int           `json:"pid"`
	Command string        `json:"command"`
	Status  ProcessStatus `json:"status"`
	// StartTime is when it started; EndTime when it ended (absent while it runs).
	StartTime time.Time `json:"startTime"`
	EndTime   time.Time `json:"endTime,omitzero"`
	// ExitCode is absent while it runs and for status error; 128+N for signal N.
	ExitCode *int `json:"exitCode,omitempty"`
	// SessionID is the session it started from; Cwd its working directory (absolute; empty
	// if it never started).
	SessionID string `json:"sessionId"`
	Cwd       string `json:"cwd"`
	// Error is set only for status error, e.g. "agent restarted while the process ran".
	Error string `json:"error,omitempty"`
	// Reason is one of the Reason constants (exec.go), or absent.
	Reason string `json:"reason,omitempty"`
	// LogBufferBytes is the log buffer per stream (stdout, stderr) the process got, in bytes:
	// StartProcessRequest.LogBufferBytes or the agent's default.
	LogBufferBytes int `json:"logBufferBytes,omitempty"`
}

// StartProcessRequest is the body of POST process/start: bash -c from the session's cwd and
// exported env (plus Env), stdin /dev/null, its own process group; it does not take the
// session's lock and outlives a deleted session. Errors: 400 INVALID_COMMAND,
// VALIDATION_FAILED (ID, logBufferBytes); 409 PROCESS_ALREADY_EXISTS.
type StartProcessRequest struct {
	Command   string            `json:"command"`
	ProcessID string            `json:"processId,omitempty"`
	SessionID string            `json:"sessionId,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	// LogBufferBytes is the bytes held per stream, 64 KiB–256 MiB; 0: hutchd's
	// processLogBytes (default 4 MiB).
	LogBufferBytes int `json:"logBufferBytes,omitempty"`
}

// StartProcessResult is the reply of process/start.
type StartProcessResult struct {
	Reply
	ProcessID string  `json:"processId"`
	PID       int     `json:"pid"`
	Command   string  `json:"command"`
	Process   Process `json:"process"`
}

// ProcessList is the reply of GET process/list[?status=running], in start order.
type ProcessList struct {
	Reply
	Processes []Process `json:"processes"`
}

// ProcessReply is the reply of GET process/{pid}.
type ProcessReply struct {
	Reply
	Process Process `json:"process"`
}

// KillProcessResult is the reply of DELETE process/{pid}[?graceMs=5000]: SIGTERM to the whole
// tree, up to graceMs (0–60000), then SIGKILL; it replies once the process has ended. Killed
// is false if it had already ended (not an error).
type KillProcessResult struct {
	Reply
	ProcessID string  `json:"processId"`
	Killed    bool    `json:"killed"`
	Process   Process `json:"process"`
}

// KillAllResult is the reply of DELETE process/kill-all: how many running processes were
// killed (in parallel).
type KillAllResult struct {
	Reply
	CleanedCount int `json:"cleanedCount"`
}

// ProcessLogs is the reply of GET process/{pid}/logs: the held output. Offsets are absolute
// byte offsets in each stream: …Offset is the first byte held (= …Dropped, the bytes lost from
// the front), …End the bytes written so far. After a drop the text starts with
// "[hutch: N earlier bytes of stdout were dropped (log buffer B bytes)]\n"; either stream not
// UTF-8 makes both base64 (Encoding "base64") without the marker.
type ProcessLogs struct {
	Reply
	ProcessID     string        `json:"processId"`
	Stdout        string        `json:"stdout"`
	Stderr        string        `json:"stderr"`
	Encoding      string        `json:"encoding,omitempty"`
	StdoutOffset  int64         `json:"stdoutOffset"`
	StdoutEnd     int64         `json:"stdoutEnd"`
	StdoutDropped int64         `json:"stdoutDropped"`
	StderrOffset  int64         `json:"stderrOffset"`
	StderrEnd     int64         `json:"stderrEnd"`
	StderrDropped int64         `json:"stderrDropped"`
	Status        ProcessStatus `json:"status"`
	ExitCode      *int          `json:"exitCode,omitempty"`
}

// Process event types (ProcessEvent.Type).
const (
	ProcessEventInfo    = "process_info"
	ProcessEventDropped = "dropped"
	ProcessEventStdout  = "stdout"
	ProcessEventStderr  = "stderr"
	ProcessEventExit    = "exit"
	ProcessEventError   = "error"
)

// ProcessEvent is one SSE frame of GET process/{pid}/stream[?stdoutOffset=N&stderrOffset=M]
// (or Last-Event-ID: N,M): "process_info" {processId, command, status, pid} first; "dropped"
// {stream, from, to} when bytes [from, to) were no longer held; "stdout"/"stderr" {processId,
// data, encoding?, offset} chunks (≤ 64 KiB, held then live, no gaps or duplicates); then
// "exit" {processId, exitCode?, status, data: "Process completed with exit code 0"} or
// "error" {code, error}, and the stream ends. Output and dropped frames carry an
// "id: <stdoutNext>,<stderrNext>" line: reconnect with those offsets to get what was missed.
type ProcessEvent struct {
	Type      string        `json:"type"`
	ProcessID string        `json:"processId,omitempty"`
	Command   string        `json:"command,omitempty"`
	Status    ProcessStatus `json:"status,omitempty"`
	PID       int           `json:"pid,omitempty"`
	Stream    string        `json:"stream,omitempty"`
	From      int64         `json:"from,omitempty"`
	To        int64         `json:"to,omitempty"`
	Data      string        `json:"data,omitempty"`
	Encoding  string        `json:"encoding,omitempty"`
	Offset    int64         `json:"offset,omitempty"`
	ExitCode  *int          `json:"exitCode,omitempty"`
	// Code, Error and Context are set on "error".
	Code      errdefs.Code   `json:"code,omitempty"`
	Error     string         `json:"error,omitempty"`
	Context   map[string]any `json:"context,omitempty"`
	Timestamp time.Time      `json:"timestamp,omitzero"`
}

// WaitLogRequest is the body of POST process/{pid}/wait-log: exactly one of Pattern (RE2,
// matched anywhere in a line; one that does not compile → 400 INVALID_PATTERN) and Text (a
// literal), per complete line with ANSI escapes removed, held output first. Stream is
// "stdout", "stderr" or "both" (default). TimeoutMs 0: no limit; expiry → 408
// PROCESS_READY_TIMEOUT; the process ending first → 409 PROCESS_EXITED_BEFORE_READY.
type WaitLogRequest struct {
	Pattern   string `json:"pattern,omitempty"`
	Text      string `json:"text,omitempty"`
	Stream    string `json:"stream,omitempty"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
}

// WaitLogResult is the reply of wait-log: the line, the match and its groups ([text] for a
// literal), named groups, and the stream it came from.
type WaitLogResult struct {
	Reply
	Line   string            `json:"line"`
	Match  []string          `json:"match"`
	Groups map[string]string `json:"groups,omitempty"`
	Stream string            `json:"stream"`
}

// WaitPortRequest is the body of POST process/{pid}/wait-port: from inside the sandbox, a TCP
// connect (Mode "tcp") or GET http://localhost:<port><path> (Mode "http", default; 127.0.0.1
// then ::1, 5 s per attempt) until it answers a Status in range. IntervalMs is clamped to
// 100–10000 (default 500). Errors: 400 INVALID_PORT; 408 PROCESS_READY_TIMEOUT; 409
// PROCESS_EXITED_BEFORE_READY.
type WaitPortRequest struct {
	Port       int          `json:"port"`
	Mode       string       `json:"mode,omitempty"`
	Path       string       `json:"path,omitempty"`
	Status     *StatusRange `json:"status,omitempty"`
	IntervalMs int64        `json:"intervalMs,omitempty"`
	TimeoutMs  int64        `json:"timeoutMs,omitempty"`
}

// StatusRange is the accepted HTTP statuses of wait-port, inclusive; a bound of 0 is its
// default (200, 399); 100 ≤ min ≤ max ≤ 599.
type StatusRange struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// WaitPortResult is the reply of wait-port; StatusCode is absent in tcp mode.
type WaitPortResult struct {
	Reply
	Port       int `json:"port"`
	StatusCode int `json:"statusCode,omitempty"`
}

// WaitExitRequest is the body of POST process/{pid}/wait-exit.
type WaitExitRequest struct {
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
}

// WaitExitResult is the reply of wait-exit.
type WaitExitResult struct {
	Reply
	ProcessID string        `json:"processId"`
	ExitCode  *int          `json:"exitCode,omitempty"`
	Status    ProcessStatus `json:"status"`
}
