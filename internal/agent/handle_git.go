package agent

import (
	"net/http"
	"path/filepath"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/files"
	"github.com/hutchdev/hutch/internal/agent/gitclone"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// handleGitCheckout: POST /api/git/checkout {repoUrl, branch?, targetDir?, depth?, timeoutMs?,
// sessionId?} → {success, repoUrl (credentials redacted), branch, targetDir, timestamp}.
func (s *Server) handleGitCheckout(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.GitCheckoutRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := gitclone.ValidateURL(req.RepoURL); err != nil {
		return err
	}
	if req.TimeoutMs < 0 {
		return errdefs.Newf(errdefs.CodeInvalidArgument, "timeoutMs %d is negative", req.TimeoutMs)
	}
	cwd, env, err := s.sessions.Snapshot(req.SessionID)
	if err != nil {
		return err
	}
	target := req.TargetDir
	if target == "" {
		target = filepath.Join(s.workdir, gitclone.RepoName(req.RepoURL))
	}
	target, err = files.Resolve(cwd, target)
	if err != nil {
		return err
	}
	res, err := gitclone.Clone(r.Context(), gitclone.Options{
		URL: req.RepoURL, Branch: req.Branch, Depth: req.Depth, TargetDir: target,
		Timeout: time.Duration(req.TimeoutMs) * time.Millisecond, Env: env, Dir: cloneDir(cwd), Shim: s.toolShim,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.GitCheckoutReply{Success: true, RepoURL: gitclone.Redact(req.RepoURL), Branch: res.Branch,
		TargetDir: target, Timestamp: now()})
	return nil
}

// cloneDir is git's working directory: the session cwd, or / when that is gone.
func cloneDir(cwd string) string {
	if ok, _ := files.Exists(cwd); ok {
		return cwd
	}
	return "/"
}
