package agent

import (
	"net/http"

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
	var req agentapi.SessionCreateRequest
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
	writeJSON(w, http.StatusOK, agentapi.SessionCreateReply{Success: true, ID: info.ID, Cwd: info.Cwd, Timestamp: now()})
	return nil
}

// handleSessionList: GET /api/session/list → {success, sessions:[{id,cwd}], timestamp}.
func (s *Server) handleSessionList(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, agentapi.SessionListReply{Success: true, Sessions: s.sessions.List(), Timestamp: now()})
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
	var req agentapi.SessionDeleteRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.SessionID == "" {
		return errdefs.New(errdefs.CodeInvalidArgument, "sessionId is required")
	}
	if err := s.sessions.Delete(req.SessionID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.SessionDeleteReply{Success: true, SessionID: req.SessionID, Timestamp: now()})
	return nil
}
