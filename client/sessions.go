package client

import (
	"context"
	"fmt"
	"net/http"

	v1 "github.com/hutchdev/hutch/api/v1"
)

// DefaultSession is the ID of the session used when none is given.
const DefaultSession = "default"

// Session is a handle on one session of a sandbox: a working directory and exported
// environment that persist from one command to the next (cd, export and unset carry over),
// isolated from other sessions. Commands of one session run one at a time; sessions run in
// parallel. Its Exec, ExecStream, ExecStreamTo, file operations and GitCheckout are those of
// *Sandbox, bound to this session (relative paths resolve against its cwd).
type Session struct {
	scope
}

// ID returns the session ID.
func (s *Session) ID() string { return s.sessionID }

// SandboxID returns the ID of the session's sandbox.
func (s *Session) SandboxID() string { return s.sandboxID }

// SessionOptions are the parameters of CreateSession. A nil *SessionOptions means all defaults.
type SessionOptions struct {
	// ID is the session ID (the sandbox ID rules, up to 128 characters); empty means the server
	// picks "session-<unix ms>".
	ID string
	// Env is added to the sandbox environment for every command of the session.
	Env map[string]string
	// Cwd is the initial working directory; empty means /workspace.
	Cwd string
}

// SessionInfo describes a session.
type SessionInfo = v1.SessionInfo

// CreateSession creates a session (POST /v1/sandboxes/{id}/session/create). An existing ID →
// SESSION_ALREADY_EXISTS (ErrAlreadyExists).
func (s *Sandbox) CreateSession(ctx context.Context, opts *SessionOptions) (*Session, error) {
	var body v1.CreateSessionRequest
	if opts != nil {
		body.ID, body.Env, body.Cwd = opts.ID, opts.Env, opts.Cwd
	}
	var reply SessionInfo
	if err := s.do(ctx, http.MethodPost, "/session/create", body, &reply); err != nil {
		return nil, fmt.Errorf("create session in sandbox %q: %w", s.sandboxID, err)
	}
	id := reply.ID
	if id == "" {
		id = body.ID
	}
	return s.Session(id), nil
}

// Session returns a handle on session id without any call. A session that does not exist is
// created by its first command (cwd /workspace, the sandbox's environment). An empty id means
// the default session.
func (s *Sandbox) Session(id string) *Session {
	if id == "" {
		id = DefaultSession
	}
	return &Session{scope: scope{c: s.c, sandboxID: s.sandboxID, sessionID: id}}
}

// ListSessions returns the sandbox's sessions (GET /v1/sandboxes/{id}/session/list).
func (s *Sandbox) ListSessions(ctx context.Context) ([]SessionInfo, error) {
	var reply v1.SessionList
	if err := s.do(ctx, http.MethodGet, "/session/list", nil, &reply); err != nil {
		return nil, fmt.Errorf("list sessions of sandbox %q: %w", s.sandboxID, err)
	}
	return reply.Sessions, nil
}

// DeleteSession deletes session id, killing its running command
// (POST /v1/sandboxes/{id}/session/delete). Unknown → SESSION_NOT_FOUND (ErrNotFound);
// "default" → SESSION_DEFAULT_UNDELETABLE (ErrFailedPrecondition).
func (s *Sandbox) DeleteSession(ctx context.Context, id string) error {
	body := v1.DeleteSessionRequest{SessionID: id}
	if err := s.do(ctx, http.MethodPost, "/session/delete", body, nil); err != nil {
		return fmt.Errorf("delete session %q of sandbox %q: %w", id, s.sandboxID, err)
	}
	return nil
}

// Delete deletes the session; see Sandbox.DeleteSession.
func (s *Session) Delete(ctx context.Context) error {
	return (&Sandbox{scope: scope{c: s.c, sandboxID: s.sandboxID}}).DeleteSession(ctx, s.sessionID)
}
