package agentapi

import "time"

// Sessions (POST /api/session/create, GET /api/session/list, POST /api/session/delete) and git
// checkout (POST /api/git/checkout). Session save is SaveSessionsReply (types.go).

// SessionCreateRequest is the body of session/create (every field optional).
type SessionCreateRequest struct {
	ID  string            `json:"id"`
	Env map[string]string `json:"env"`
	Cwd string            `json:"cwd"`
}

// SessionCreateReply is the reply of session/create.
type SessionCreateReply struct {
	Success   bool      `json:"success"`
	ID        string    `json:"id"`
	Cwd       string    `json:"cwd"`
	Timestamp time.Time `json:"timestamp"`
}

// SessionInfo describes a session.
type SessionInfo struct {
	ID  string `json:"id"`
	Cwd string `json:"cwd"`
}

// SessionListReply is the reply of session/list.
type SessionListReply struct {
	Success   bool          `json:"success"`
	Sessions  []SessionInfo `json:"sessions"`
	Timestamp time.Time     `json:"timestamp"`
}

// SessionDeleteRequest is the body of session/delete.
type SessionDeleteRequest struct {
	SessionID string `json:"sessionId"`
}

// SessionDeleteReply is the reply of session/delete.
type SessionDeleteReply struct {
	Success   bool      `json:"success"`
	SessionID string    `json:"sessionId"`
	Timestamp time.Time `json:"timestamp"`
}

// GitCheckoutRequest is the body of git/checkout.
type GitCheckoutRequest struct {
	RepoURL   string `json:"repoUrl"`
	Branch    string `json:"branch"`
	TargetDir string `json:"targetDir"`
	Depth     int    `json:"depth"`
	TimeoutMs int64  `json:"timeoutMs"`
	SessionID string `json:"sessionId"`
}

// GitCheckoutReply is the reply of git/checkout; RepoURL has its credentials redacted.
type GitCheckoutReply struct {
	Success   bool      `json:"success"`
	RepoURL   string    `json:"repoUrl"`
	Branch    string    `json:"branch"`
	TargetDir string    `json:"targetDir"`
	Timestamp time.Time `json:"timestamp"`
}
