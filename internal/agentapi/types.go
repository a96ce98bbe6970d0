package agentapi

import (
	"time"

	"github.com/hutchdev/hutch/internal/archive"
)

// PingReply is the reply of GET /api/ping. The protocol version is in HeaderProtocol, not
// here: the reply is relayed as the public ping's, which keeps its shape.
type PingReply struct {
	Success   bool      `json:"success"`
	Status    string    `json:"status"`  // "healthy"
	Version   string    `json:"version"` // the agent's build version
	Timestamp time.Time `json:"timestamp"`
}

// SaveSessionsReply is the reply of SaveSessions.
type SaveSessionsReply struct {
	Success   bool      `json:"success"`
	Saved     int       `json:"saved"` // sessions written
	Timestamp time.Time `json:"timestamp"`
}

// ArchiveRequest is the body of Archive.
type ArchiveRequest struct {
	Dir       string   `json:"dir"`                 // absolute directory to archive
	Excludes  []string `json:"excludes,omitempty"`  // glob patterns (package archive)
	Gitignore bool     `json:"gitignore,omitempty"` // also leave out what git ignores
}

// ExtractReply is the reply of Extract.
type ExtractReply struct {
	Success bool   `json:"success"`
	Dir     string `json:"dir"` // the directory extracted into, its symlinks resolved
	archive.Stats
	Timestamp time.Time `json:"timestamp"`
}
