package agentapi

import "time"

// Background processes (/api/process/...).

// ProcessStatus is a process's state: starting (only while it is being started), running,
// completed (exit 0), failed (another exit code), killed (exit 137 or 143) or error (it could
// not start, or the agent died while it ran).
type ProcessStatus string

// ProcessInfo is a process record.
type ProcessInfo struct {
	ID        string        `json:"id"`
	PID       int           `json:"pid"` // the process the agent started; 0 if never started
	Command   string        `json:"command"`
	Status    ProcessStatus `json:"status"`
	StartTime time.Time     `json:"startTime"`
	EndTime   *time.Time    `json:"endTime,omitempty"`
	ExitCode  *int          `json:"exitCode,omitempty"` // absent while running; 128+N for signal N
	SessionID string        `json:"sessionId"`
	Cwd       string        `json:"cwd"`
	Error     string        `json:"error,omitempty"` // only with status "error"
	// Reason says why a killed process died when the agent knows: "oom-killed",
	// "process-limit" or "cpu-starved" (package oom).
	Reason string `json:"reason,omitempty"`
	// LogBufferBytes is the log buffer per stream, in bytes: the one asked for, or the
	// default lowered to fit the log budget.
	LogBufferBytes int `json:"logBufferBytes,omitempty"`
}

// ProcessStartRequest is the body of POST /api/process/start.
type ProcessStartRequest struct {
	Command        string            `json:"command"`
	ProcessID      string            `json:"processId"`
	SessionID      string            `json:"sessionId"`
	Env            map[string]string `json:"env"`
	Cwd            string            `json:"cwd"`
	LogBufferBytes int               `json:"logBufferBytes"`
}

// ProcessStartReply is the reply of process/start.
type ProcessStartReply struct {
	Success   bool        `json:"success"`
	ProcessID string      `json:"processId"`
	PID       int         `json:"pid"`
	Command   string      `json:"command"`
	Process   ProcessInfo `json:"process"`
	Timestamp time.Time   `json:"timestamp"`
}

// ProcessListReply is the reply of GET /api/process/list.
type ProcessListReply struct {
	Success   bool          `json:"success"`
	Processes []ProcessInfo `json:"processes"`
	Timestamp time.Time     `json:"timestamp"`
}

// ProcessReply is the reply of GET /api/process/{pid}.
type ProcessReply struct {
	Success   bool        `json:"success"`
	Process   ProcessInfo `json:"process"`
	Timestamp time.Time   `json:"timestamp"`
}

// ProcessKillReply is the reply of DELETE /api/process/{pid}, once the process has ended.
type ProcessKillReply struct {
	Success   bool        `json:"success"`
	ProcessID string      `json:"processId"`
	Killed    bool        `json:"killed"`
	Process   ProcessInfo `json:"process"`
	Timestamp time.Time   `json:"timestamp"`
}

// ProcessKillAllReply is the reply of DELETE /api/process/kill-all.
type ProcessKillAllReply struct {
	Success      bool      `json:"success"`
	CleanedCount int       `json:"cleanedCount"`
	Timestamp    time.Time `json:"timestamp"`
}

// ProcessLogsReply is the reply of GET /api/process/{pid}/logs: the held output of each
// stream, where it starts (offset), ends and how much was dropped before it.
type ProcessLogsReply struct {
	Success       bool          `json:"success"`
	ProcessID     string        `json:"processId"`
	Stdout        string        `json:"stdout"`
	Stderr        string        `json:"stderr"`
	Encoding      string        `json:"encoding,omitempty"` // "base64" when either is not UTF-8
	StdoutOffset  int64         `json:"stdoutOffset"`
	StdoutEnd     int64         `json:"stdoutEnd"`
	StdoutDropped int64         `json:"stdoutDropped"`
	StderrOffset  int64         `json:"stderrOffset"`
	StderrEnd     int64         `json:"stderrEnd"`
	StderrDropped int64         `json:"stderrDropped"`
	Status        ProcessStatus `json:"status"`
	ExitCode      *int          `json:"exitCode,omitempty"`
	Timestamp     time.Time     `json:"timestamp"`
}

// ProcessInfoEvent is the first event of a process stream (GET /api/process/{pid}/stream).
type ProcessInfoEvent struct {
	Type      string        `json:"type"` // "process_info"
	ProcessID string        `json:"processId"`
	Command   string        `json:"command"`
	Status    ProcessStatus `json:"status"`
	PID       int           `json:"pid"`
	Timestamp time.Time     `json:"timestamp"`
}

// ProcessOutputEvent is a "stdout" or "stderr" event of a process stream; Offset is that of
// its first byte in its stream.
type ProcessOutputEvent struct {
	Type      string    `json:"type"`
	ProcessID string    `json:"processId"`
	Data      string    `json:"data"`
	Encoding  string    `json:"encoding,omitempty"`
	Offset    int64     `json:"offset"`
	Timestamp time.Time `json:"timestamp"`
}

// ProcessDroppedEvent says that bytes From–To of Stream were dropped from the log buffer before
// the stream could send them.
type ProcessDroppedEvent struct {
	Type      string    `json:"type"` // "dropped"
	Stream    string    `json:"stream"`
	From      int64     `json:"from"`
	To        int64     `json:"to"`
	Timestamp time.Time `json:"timestamp"`
}

// ProcessExitEvent is the last event of a process stream; Data is a sentence for humans.
type ProcessExitEvent struct {
	Type      string        `json:"type"` // "exit"
	ProcessID string        `json:"processId"`
	ExitCode  *int          `json:"exitCode,omitempty"`
	Status    ProcessStatus `json:"status"`
	Data      string        `json:"data"`
	Timestamp time.Time     `json:"timestamp"`
}

// WaitLogRequest is the body of POST /api/process/{pid}/wait-log: exactly one of Pattern (RE2)
// and Text (a substring); Stream "stdout", "stderr" or "both" (empty).
type WaitLogRequest struct {
	Pattern   string `json:"pattern"`
	Text      string `json:"text"`
	Stream    string `json:"stream"`
	TimeoutMs int64  `json:"timeoutMs"`
}

// WaitLogReply is the reply of wait-log: the line and the match with its groups.
type WaitLogReply struct {
	Success   bool              `json:"success"`
	Line      string            `json:"line"`
	Match     []string          `json:"match"`
	Groups    map[string]string `json:"groups,omitempty"`
	Stream    string            `json:"stream"`
	Timestamp time.Time         `json:"timestamp"`
}

// WaitPortRequest is the body of POST /api/process/{pid}/wait-port.
type WaitPortRequest struct {
	Port       int            `json:"port"`
	Mode       string         `json:"mode"`
	Path       string         `json:"path"`
	Status     WaitPortStatus `json:"status"`
	IntervalMs int64          `json:"intervalMs"`
	TimeoutMs  int64          `json:"timeoutMs"`
}

// WaitPortStatus is the range of HTTP statuses wait-port accepts in http mode.
type WaitPortStatus struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// WaitPortReply is the reply of wait-port (StatusCode: the accepting HTTP status, absent in
// tcp mode).
type WaitPortReply struct {
	Success    bool      `json:"success"`
	Port       int       `json:"port"`
	StatusCode int       `json:"statusCode,omitempty"`
	Timestamp  time.Time `json:"timestamp"`
}

// WaitExitRequest is the body of POST /api/process/{pid}/wait-exit.
type WaitExitRequest struct {
	TimeoutMs int64 `json:"timeoutMs"`
}

// WaitExitReply is the reply of wait-exit.
type WaitExitReply struct {
	Success   bool          `json:"success"`
	ProcessID string        `json:"processId"`
	ExitCode  *int          `json:"exitCode,omitempty"`
	Status    ProcessStatus `json:"status"`
	Timestamp time.Time     `json:"timestamp"`
}
