package agent

import (
	"net/http"
	"time"

	"github.com/hutchdev/hutch/internal/agent/files"
)

// handleListFiles: POST /api/list-files {path, options:{recursive?, includeHidden?},
// sessionId?} → {success, path, files:[FileInfo], count, timestamp}.
func (s *Server) handleListFiles(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Path    string `json:"path"`
		Options struct {
			Recursive     bool `json:"recursive"`
			IncludeHidden bool `json:"includeHidden"`
		} `json:"options"`
		SessionID string `json:"sessionId"`
	}
	if err := decode(w, r, &req); err != nil {
		return err
	}
	p, err := s.resolvePath(req.SessionID, req.Path)
	if err != nil {
		return err
	}
	list, err := files.List(p, files.ListOptions{Recursive: req.Options.Recursive, IncludeHidden: req.Options.IncludeHidden})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Success   bool         `json:"success"`
		Path      string       `json:"path"`
		Files     []files.Info `json:"files"`
		Count     int          `json:"count"`
		Timestamp time.Time    `json:"timestamp"`
	}{true, p, list, len(list), now()})
	return nil
}

// handleMkdir: POST /api/mkdir {path, recursive?, sessionId?} → {success, path, recursive,
// timestamp}.
func (s *Server) handleMkdir(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
		SessionID string `json:"sessionId"`
	}
	if err := decode(w, r, &req); err != nil {
		return err
	}
	p, err := s.resolvePath(req.SessionID, req.Path)
	if err != nil {
		return err
	}
	if err := files.Mkdir(p, req.Recursive); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Success   bool      `json:"success"`
		Path      string    `json:"path"`
		Recursive bool      `json:"recursive"`
		Timestamp time.Time `json:"timestamp"`
	}{true, p, req.Recursive, now()})
	return nil
}

// pathReply answers delete.
type pathReply struct {
	Success   bool      `json:"success"`
	Path      string    `json:"path"`
	Timestamp time.Time `json:"timestamp"`
}

// handleDelete: POST /api/delete {path, recursive?, sessionId?} → {success, path, timestamp}.
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
		SessionID string `json:"sessionId"`
	}
	if err := decode(w, r, &req); err != nil {
		return err
	}
	p, err := s.resolvePath(req.SessionID, req.Path)
	if err != nil {
		return err
	}
	if err := files.Delete(p, req.Recursive); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pathReply{true, p, now()})
	return nil
}

// moveReply answers rename and move.
type moveReply struct {
	Success   bool      `json:"success"`
	Path      string    `json:"path"`
	NewPath   string    `json:"newPath"`
	Timestamp time.Time `json:"timestamp"`
}

// move resolves both paths in session sid and moves like mv.
func (s *Server) move(w http.ResponseWriter, sid, from, to string) error {
	src, err := s.resolvePath(sid, from)
	if err != nil {
		return err
	}
	dst, err := s.resolvePath(sid, to)
	if err != nil {
		return err
	}
	final, err := files.Move(src, dst)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, moveReply{true, src, final, now()})
	return nil
}

// handleRename: POST /api/rename {oldPath, newPath, sessionId?} → {success, path, newPath,
// timestamp}.
func (s *Server) handleRename(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		OldPath   string `json:"oldPath"`
		NewPath   string `json:"newPath"`
		SessionID string `json:"sessionId"`
	}
	if err := decode(w, r, &req); err != nil {
		return err
	}
	return s.move(w, req.SessionID, req.OldPath, req.NewPath)
}

// handleMove: POST /api/move {sourcePath, destinationPath, sessionId?} → {success, path,
// newPath, timestamp}.
func (s *Server) handleMove(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		SourcePath      string `json:"sourcePath"`
		DestinationPath string `json:"destinationPath"`
		SessionID       string `json:"sessionId"`
	}
	if err := decode(w, r, &req); err != nil {
		return err
	}
	return s.move(w, req.SessionID, req.SourcePath, req.DestinationPath)
}

// handleExists: POST /api/exists {path, sessionId?} → {success, path, exists, timestamp}.
func (s *Server) handleExists(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Path      string `json:"path"`
		SessionID string `json:"sessionId"`
	}
	if err := decode(w, r, &req); err != nil {
		return err
	}
	p, err := s.resolvePath(req.SessionID, req.Path)
	if err != nil {
		return err
	}
	ok, err := files.Exists(p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Success   bool      `json:"success"`
		Path      string    `json:"path"`
		Exists    bool      `json:"exists"`
		Timestamp time.Time `json:"timestamp"`
	}{true, p, ok, now()})
	return nil
}
