package v1

// CreateSessionRequest is the body of POST /v1/sandboxes/{id}/session/create: a shell state
// (cwd and exported environment) that commands of the session share, as the reference
// system's createSession(). Errors: 409 SESSION_ALREADY_EXISTS, 400 VALIDATION_FAILED.
type CreateSessionRequest struct {
	// ID is the session's ID; empty means a generated one.
	ID string `json:"id,omitempty"`
	// Env is exported in the session; Cwd is its first working directory.
	Env map[string]string `json:"env,omitempty"`
	Cwd string            `json:"cwd,omitempty"`
}

// SessionInfo is a session: its ID and current working directory. It is the reply of
// session/create (with Reply's fields) and an item of SessionList.
type SessionInfo struct {
	ID  string `json:"id"`
	Cwd string `json:"cwd"`
}

// CreateSessionResult is the reply of session/create.
type CreateSessionResult struct {
	Reply
	SessionInfo
}

// SessionList is the reply of GET session/list.
type SessionList struct {
	Reply
	Sessions []SessionInfo `json:"sessions"`
}

// DeleteSessionRequest is the body of POST session/delete, and DeleteSessionResult its
// reply. Errors: 404 SESSION_NOT_FOUND; 400 SESSION_DEFAULT_UNDELETABLE for "default".
type DeleteSessionRequest struct {
	SessionID string `json:"sessionId"`
}

// DeleteSessionResult is the reply of session/delete.
type DeleteSessionResult struct {
	Reply
	SessionID string `json:"sessionId"`
}
