package v1

import (
	"encoding/json"
	"time"
)

// TerminalSubprotocol is the WebSocket subprotocol of GET /v1/sandboxes/{id}/terminals/{tid}:
// binary messages are raw terminal bytes both ways (output first replays the ring buffer),
// text messages are JSON control messages (TerminalControl).
const TerminalSubprotocol = "hutch.v1"

// TerminalInfo is a terminal of a sandbox: a shell on a pseudo-terminal that keeps running
// when its viewers leave.
type TerminalInfo struct {
	ID      string `json:"id"`
	Session string `json:"session"`
	// PID is the process the agent started (the shell, or its shim).
	PID       int       `json:"pid"`
	Cols      int       `json:"cols"`
	Rows      int       `json:"rows"`
	Viewers   int       `json:"viewers"` // WebSocket connections attached now
	CreatedAt time.Time `json:"createdAt"`
	Exited    bool      `json:"exited"`
	// ExitCode is null while it runs; 128+N when killed by signal N.
	ExitCode *int `json:"exitCode"`
}

// TerminalList is the reply of GET /v1/sandboxes/{id}/terminals, sorted by ID.
type TerminalList struct {
	Reply
	Terminals []TerminalInfo `json:"terminals"`
}

// KillTerminalResult is the reply of DELETE /v1/sandboxes/{id}/terminals/{tid}: SIGHUP to the
// shell's session and process tree, SIGKILL to what is left after a grace period; attached
// viewers get the exit. Unknown → 404 TERMINAL_NOT_FOUND.
type KillTerminalResult struct {
	Reply
	Terminal TerminalInfo `json:"terminal"`
}

// TerminalControl is a JSON control message (a text message) on a terminal WebSocket. From
// the server: "ready" (first, once: ID, Cols, Rows, PID, and ReplayBytes, the bytes of earlier
// output sent before live output), "exit" (Code is the shell's exit code, a JSON number; the
// connection then closes) and "error" (Code is an error code, a JSON string, with Message: a
// refused control message; the terminal stays usable). From the client: "resize" (Cols,
// Rows, 1–1000 each).
type TerminalControl struct {
	Type        string          `json:"type"`
	ID          string          `json:"id,omitempty"`
	Cols        int             `json:"cols,omitempty"`
	Rows        int             `json:"rows,omitempty"`
	PID         int             `json:"pid,omitempty"`
	ReplayBytes int64           `json:"replayBytes,omitempty"`
	Code        json.RawMessage `json:"code,omitempty"`
	Message     string          `json:"message,omitempty"`
}
