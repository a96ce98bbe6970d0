package agentapi

import (
	"encoding/json"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// Terminals (GET /api/terminals, GET /api/terminals/{tid} with a WebSocket upgrade, DELETE
// /api/terminals/{tid}). On the WebSocket, binary frames are the terminal's bytes both ways and
// text frames are JSON: TerminalReadyFrame, TerminalExitFrame and TerminalErrorFrame from the
// agent, TerminalControlFrame to it.

// Query parameters of a terminal connect (GET /api/terminals/{tid} with a WebSocket upgrade).
const (
	QueryTerminalSession = "session"
	QueryTerminalCols    = "cols"
	QueryTerminalRows    = "rows"
	QueryTerminalShell   = "shell"
)

// TerminalQuery are the query parameters a terminal connect takes; they apply to a new terminal
// only.
var TerminalQuery = []string{QueryTerminalSession, QueryTerminalCols, QueryTerminalRows, QueryTerminalShell}

// TerminalInfo describes a terminal.
type TerminalInfo struct {
	ID        string    `json:"id"`
	Session   string    `json:"session"`
	PID       int       `json:"pid"` // the process the agent started (the shim, or the shell)
	Cols      int       `json:"cols"`
	Rows      int       `json:"rows"`
	Viewers   int       `json:"viewers"`
	CreatedAt time.Time `json:"createdAt"`
	Exited    bool      `json:"exited"`
	ExitCode  *int      `json:"exitCode"` // null while running; 128+N when killed by signal N
}

// TerminalListReply is the reply of GET /api/terminals.
type TerminalListReply struct {
	Success   bool           `json:"success"`
	Terminals []TerminalInfo `json:"terminals"`
	Timestamp time.Time      `json:"timestamp"`
}

// TerminalKillReply is the reply of DELETE /api/terminals/{tid}.
type TerminalKillReply struct {
	Success   bool         `json:"success"`
	Terminal  TerminalInfo `json:"terminal"`
	Timestamp time.Time    `json:"timestamp"`
}

// TerminalReadyFrame is the first frame of a terminal connection; ReplayBytes of held output
// follow as binary frames.
type TerminalReadyFrame struct {
	Type        string `json:"type"` // "ready"
	ID          string `json:"id"`
	Cols        int    `json:"cols"`
	Rows        int    `json:"rows"`
	PID         int    `json:"pid"`
	ReplayBytes int64  `json:"replayBytes"`
}

// TerminalExitFrame is sent when the shell has exited, before a normal close.
type TerminalExitFrame struct {
	Type string `json:"type"` // "exit"
	Code int    `json:"code"`
}

// TerminalErrorFrame answers a bad control frame; the connection stays open.
type TerminalErrorFrame struct {
	Type    string       `json:"type"` // "error"
	Code    errdefs.Code `json:"code"`
	Message string       `json:"message"`
}

// TerminalControlFrame is a control frame from the viewer: {"type":"resize","cols":C,"rows":R}.
// Cols and Rows are raw so that a value of the wrong type is the frame's error, not the JSON's.
type TerminalControlFrame struct {
	Type string          `json:"type"`
	Cols json.RawMessage `json:"cols"`
	Rows json.RawMessage `json:"rows"`
}
