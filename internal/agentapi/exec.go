package agentapi

import "time"

// Execute and execute/stream (POST /api/execute, /api/execute/stream).

// ExecRequest is the body of execute and execute/stream.
type ExecRequest struct {
	Command     string            `json:"command"`
	SessionID   string            `json:"sessionId"`
	TimeoutMs   int64             `json:"timeoutMs"`
	Env         map[string]string `json:"env"`
	Cwd         string            `json:"cwd"`
	Stdin       *string           `json:"stdin"`
	StdinBase64 *string           `json:"stdinBase64"`
}

// ExecReply is the reply of execute. The agent writes it field by field from its output
// buffers (a json.Marshal of 16 MiB of output would hold several copies of it at once); the
// fields after Reason are marshalled from ExecReplyTail.
type ExecReply struct {
	Success   bool      `json:"success"`
	ExitCode  int       `json:"exitCode"`
	Stdout    string    `json:"stdout"`
	Stderr    string    `json:"stderr"`
	Encoding  string    `json:"encoding,omitempty"`  // "base64" when stdout or stderr is not UTF-8
	Truncated bool      `json:"truncated,omitempty"` // an output passed the buffer and was cut
	Reason    string    `json:"reason,omitempty"`    // why a killed command died (package oom)
	Command   string    `json:"command"`
	Duration  int64     `json:"duration"` // ms
	SessionID string    `json:"sessionId"`
	Timestamp time.Time `json:"timestamp"`
}

// ExecReplyTail is the last fields of ExecReply, which the agent marshals as one object.
type ExecReplyTail struct {
	Command   string    `json:"command"`
	Duration  int64     `json:"duration"`
	SessionID string    `json:"sessionId"`
	Timestamp time.Time `json:"timestamp"`
}

// ExecStartEvent is the first event of execute/stream, sent once the command runs.
type ExecStartEvent struct {
	Type      string    `json:"type"` // "start"
	Command   string    `json:"command"`
	PID       int       `json:"pid"`
	SessionID string    `json:"sessionId"`
	Timestamp time.Time `json:"timestamp"`
}

// OutputEvent is a "stdout" or "stderr" event of execute/stream.
type OutputEvent struct {
	Type      string    `json:"type"`
	Data      string    `json:"data"`
	Encoding  string    `json:"encoding,omitempty"` // "base64" for a chunk that is not UTF-8
	Timestamp time.Time `json:"timestamp"`
}

// ExecCompleteEvent is the last event of an execute/stream whose command ran to its end.
type ExecCompleteEvent struct {
	Type      string    `json:"type"` // "complete"
	ExitCode  int       `json:"exitCode"`
	Duration  int64     `json:"duration"` // ms
	Reason    string    `json:"reason,omitempty"`
	Timestamp time.Time `json:"timestamp"`
}

// ErrorEvent ends a stream that failed (execute/stream, read/stream, a process stream).
type ErrorEvent struct {
	Type      string    `json:"type"` // "error"
	Code      string    `json:"code"`
	Error     string    `json:"error"`
	Timestamp time.Time `json:"timestamp"`
}
