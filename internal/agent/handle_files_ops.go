package agent

import (
	"net/http"

	"github.com/hutchdev/hutch/internal/agent/files"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// handleListFiles: POST /api/list-files {path, options:{recursive?, includeHidden?},
// sessionId?} → {success, path, files:[FileInfo], count, timestamp}.
func (s *Server) handleListFiles(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.ListFilesRequest
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
	writeJSON(w, http.StatusOK, agentapi.ListFilesReply{Success: true, Path: p, Files: fileInfos(list), Count: len(list), Timestamp: now()})
	return nil
}

// fileInfos is a listing as sent. (package files cannot use the agentapi types: the tar
// package, which agentapi's ExtractReply uses, imports it.)
func fileInfos(list []files.Info) []agentapi.FileInfo {
	if list == nil {
		return nil
	}
	out := make([]agentapi.FileInfo, len(list))
	for i, f := range list {
		out[i] = agentapi.FileInfo{Name: f.Name, AbsolutePath: f.AbsolutePath, RelativePath: f.RelativePath, Type: f.Type,
			Size: f.Size, ModifiedAt: f.ModifiedAt, Mode: f.Mode, Permissions: agentapi.FilePermissions(f.Permissions)}
	}
	return out
}

// handleMkdir: POST /api/mkdir {path, recursive?, sessionId?} → {success, path, recursive,
// timestamp}.
func (s *Server) handleMkdir(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.MkdirRequest
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
	writeJSON(w, http.StatusOK, agentapi.MkdirReply{Success: true, Path: p, Recursive: req.Recursive, Timestamp: now()})
	return nil
}

// handleDelete: POST /api/delete {path, recursive?, sessionId?} → {success, path, timestamp}.
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.DeleteRequest
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
	writeJSON(w, http.StatusOK, agentapi.PathReply{Success: true, Path: p, Timestamp: now()})
	return nil
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
	writeJSON(w, http.StatusOK, agentapi.MoveReply{Success: true, Path: src, NewPath: final, Timestamp: now()})
	return nil
}

// handleRename: POST /api/rename {oldPath, newPath, sessionId?} → {success, path, newPath,
// timestamp}.
func (s *Server) handleRename(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.RenameRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	return s.move(w, req.SessionID, req.OldPath, req.NewPath)
}

// handleMove: POST /api/move {sourcePath, destinationPath, sessionId?} → {success, path,
// newPath, timestamp}.
func (s *Server) handleMove(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.MoveRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	return s.move(w, req.SessionID, req.SourcePath, req.DestinationPath)
}

// handleExists: POST /api/exists {path, sessionId?} → {success, path, exists, timestamp}.
func (s *Server) handleExists(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.ExistsRequest
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
	writeJSON(w, http.StatusOK, agentapi.ExistsReply{Success: true, Path: p, Exists: ok, Timestamp: now()})
	return nil
}
