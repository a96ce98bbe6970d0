package agent

import (
	"net/http"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/session"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// handlePing: GET /api/ping → {success, status:"healthy", version, timestamp}, with the
// protocol version in agentapi.HeaderProtocol.
func (s *Server) handlePing(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set(agentapi.HeaderProtocol, agentapi.Version)
	writeJSON(w, http.StatusOK, agentapi.PingReply{Success: true, Status: "healthy", Version: s.version, Timestamp: now()})
	return nil
}

// handleSessionCreate: POST /api/session/create {id?, env?, cwd?} → {success, id, cwd, timestamp}.
func (s *Server) handleSessionCreate(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ID  string            `json:"id"`
		Env map[string]string `json:"env"`
		Cwd string            `json:"cwd"`
	}
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := validateEnv(req.Env); err != nil {
		return err
	}
	info, err := s.sessions.Create(session.CreateOptions{ID: req.ID, Env: req.Env, Cwd: req.Cwd})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Success   bool      `json:"success"`
		ID        string    `json:"id"`
		Cwd       string    `json:"cwd"`
		Timestamp time.Time `json:"timestamp"`
	}{true, info.ID, info.Cwd, now()})
	return nil
}

// handleSessionList: GET /api/session/list → {success, sessions:[{id,cwd}], timestamp}.
func (s *Server) handleSessionList(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, struct {
		Success   bool           `json:"success"`
		Sessions  []session.Info `json:"sessions"`
		Timestamp time.Time      `json:"timestamp"`
	}{true, s.sessions.List(), now()})
	return nil
}

// handleSessionSave: POST /api/session/save → {success, saved, timestamp}: writes every
// session's cwd and environment to the session file now, as a shutdown does (hutchd asks before
// it checkpoints a sandbox, so that a wake that cannot restore the memory still finds them).
func (s *Server) handleSessionSave(w http.ResponseWriter, _ *http.Request) error {
	n, err := s.sessions.Save()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.SaveSessionsReply{Success: true, Saved: n, Timestamp: now()})
	return nil
}

// handleSessionDelete: POST /api/session/delete {sessionId} → {success, sessionId, timestamp}.
func (s *Server) handleSessionDelete(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		SessionID string `json:"sessionId"`
	}
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.SessionID == "" {
		return errdefs.New(errdefs.CodeInvalidArgument, "sessionId is required")
	}
	if err := s.sessions.Delete(req.SessionID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Success   bool      `json:"success"`
		SessionID string    `json:"sessionId"`
		Timestamp time.Time `json:"timestamp"`
	}{true, req.SessionID, now()})
	return nil
}
