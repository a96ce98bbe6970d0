package agent

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/files"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// resolvePath validates p and resolves it against the cwd of session sid.
func (s *Server) resolvePath(sid, p string) (string, error) {
	if err := files.CheckPath(p); err != nil {
		return "", err
	}
	cwd, err := s.sessions.Cwd(sid)
	if err != nil {
		return "", err
	}
	return files.Resolve(cwd, p)
}

// handleWrite: POST /api/write {path, content, encoding?, sessionId?} → {success, path, size,
// timestamp}. Parents are created; the write is atomic.
func (s *Server) handleWrite(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.WriteRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	p, err := s.resolvePath(req.SessionID, req.Path)
	if err != nil {
		return err
	}
	var data []byte
	switch strings.ToLower(req.Encoding) {
	case "", "utf-8", "utf8":
		data = []byte(req.Content)
	case "base64":
		data, err = base64.StdEncoding.DecodeString(req.Content)
		if err != nil {
			return errdefs.Wrap(errdefs.CodeInvalidArgument, err, "content is not valid base64").With("path", p)
		}
	default:
		return errdefs.Newf(errdefs.CodeInvalidArgument, "unknown encoding %q: want utf-8 or base64", req.Encoding)
	}
	n, err := files.Write(p, bytes.NewReader(data))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.WriteReply{Success: true, Path: p, Size: n, Timestamp: now()})
	return nil
}

// handleFilePut: PUT /api/files?path=P&sessionId=S with a raw body of any size → {success,
// path, size, timestamp}. The body is streamed to a temp file, then renamed into place.
func (s *Server) handleFilePut(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p, err := s.resolvePath(q.Get("sessionId"), q.Get("path"))
	if err != nil {
		return err
	}
	n, err := files.Write(p, r.Body)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.WriteReply{Success: true, Path: p, Size: n, Timestamp: now()})
	return nil
}
