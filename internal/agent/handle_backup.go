package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/files"
	"github.com/hutchdev/hutch/internal/agent/gitclone"
	"github.com/hutchdev/hutch/internal/agentapi"
	"github.com/hutchdev/hutch/internal/archive"
	"github.com/hutchdev/hutch/internal/fserr"
)

// gitTimeout bounds the `git ls-files` run of a gitignore archive.
const gitTimeout = 2 * time.Minute

// handleBackupArchive: POST /api/backup/archive {dir, excludes?, gitignore?} → 200 with an
// uncompressed tar of dir (application/x-tar, streamed), trailers agentapi.TrailerArchiveStats or
// agentapi.TrailerArchiveError, and agentapi.HeaderWarning lines. dir's symlinks are resolved first and the
// result must be under archive.AllowedRoots. Errors before the reply: INVALID_PATH (not
// absolute), INVALID_BACKUP_CONFIG (resolves outside the allowed roots), FILE_NOT_FOUND,
// NOT_DIRECTORY, VALIDATION_FAILED (bad pattern).
func (s *Server) handleBackupArchive(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.ArchiveRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	dir, err := absDir(req.Dir)
	if err != nil {
		return err
	}
	if err := archive.ValidatePatterns(req.Excludes); err != nil {
		return err
	}
	if dir, err = archive.ResolveDir(dir, archive.AllowedRoots); err != nil {
		return err
	}
	if err := checkDir(dir); err != nil {
		return err
	}
	opts := archive.Options{Excludes: req.Excludes}
	if req.Gitignore {
		paths, warning := gitIgnored(r.Context(), dir, s.toolShim)
		if warning != "" {
			w.Header().Add(agentapi.HeaderWarning, warning)
			s.log.InfoContext(r.Context(), "backup archive: gitignore not applied", "dir", dir, "warning", warning)
		}
		opts.Paths = paths
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Trailer", agentapi.TrailerArchiveStats+", "+agentapi.TrailerArchiveError)
	w.WriteHeader(http.StatusOK)
	st, err := archive.Write(r.Context(), w, dir, opts)
	if err != nil {
		env := errdefs.ToEnvelope(err, "backup.archive")
		b, _ := json.Marshal(env)
		w.Header().Set(agentapi.TrailerArchiveError, string(b))
		if r.Context().Err() == nil {
			s.log.WarnContext(r.Context(), "backup archive failed", "dir", dir, "err", err)
		}
		return nil
	}
	b, _ := json.Marshal(st)
	w.Header().Set(agentapi.TrailerArchiveStats, string(b))
	return nil
}

// handleBackupExtract: POST /api/backup/extract?dir=D with a tar body → {success, dir, files,
// dirs, symlinks, hardLinks, bytes, timestamp}. D's symlinks are resolved first and the result
// must be under archive.AllowedRoots; the resolved directory's content is replaced by the
// archive's, all or nothing (archive.Extract); reply.dir is the resolved path. Errors:
// INVALID_PATH, INVALID_BACKUP_CONFIG (resolves outside the allowed roots, or a mount point
// below it), VALIDATION_FAILED (unsafe entry, bad archive), NOT_DIRECTORY, NO_SPACE and other
// file codes.
func (s *Server) handleBackupExtract(w http.ResponseWriter, r *http.Request) error {
	dir, err := absDir(r.URL.Query().Get("dir"))
	if err != nil {
		return err
	}
	if dir, err = archive.ResolveDir(dir, archive.AllowedRoots); err != nil {
		return err
	}
	// A cancelled request (hutchd gone, the agent shutting down) must not leave Extract blocked
	// reading a stalled body: the read deadline ends the read, Extract removes its work
	// directory and returns.
	rc := http.NewResponseController(w)
	stop := context.AfterFunc(r.Context(), func() { _ = rc.SetReadDeadline(time.Now()) })
	defer stop()
	st, err := archive.Extract(r.Context(), r.Body, dir)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.ExtractReply{Success: true, Dir: dir, Stats: st, Timestamp: now()})
	return nil
}

// absDir validates an absolute directory path and cleans it.
func absDir(p string) (string, error) {
	if err := files.CheckPath(p); err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		return "", errdefs.Newf(errdefs.CodeInvalidPath, "path %q is not absolute", p).With("path", p)
	}
	return filepath.Clean(p), nil
}

// checkDir reports FILE_NOT_FOUND or NOT_DIRECTORY (and other file codes) for dir.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fserr.Map(err, dir)
	}
	if !fi.IsDir() {
		return errdefs.Newf(errdefs.CodeNotDirectory, "%s is not a directory", dir).With("path", dir)
	}
	return nil
}

// gitIgnored lists what git ignores below dir (paths relative to dir; directories end with
// "/"). When git is missing, dir is not in a work tree or git fails otherwise, it returns no
// paths and a warning.
//
// git runs the repository's configured programs (a core.fsmonitor hook runs on ls-files), so
// it runs as the sandbox's code does (gitclone.Command): under shim (the argv prefix of
// hutch-init's `shim --`, nil: directly), at the commands' nice and oom_score_adj, in a session
// of its own (never in the agent's process group, which gVisor's guard does not kill: an
// fsmonitor hook that starts 200 busy loops there silences the agent for good), with
// fsmonitor off, and its whole group killed at the timeout.
func gitIgnored(ctx context.Context, dir string, shim []string) ([]string, string) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	cmd, err := gitclone.Command(ctx, shim, "-c", "safe.directory=*", "-c", "core.fsmonitor=false", "-C", dir,
		"ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
	if errors.Is(err, exec.ErrNotFound) {
		return nil, "gitignore: git is not installed; nothing was excluded by .gitignore"
	}
	if err != nil {
		return nil, "gitignore: " + err.Error() + "; nothing was excluded by .gitignore"
	}
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "GIT_TERMINAL_PROMPT=0", "HOME=/root"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "not a git repository") {
			return nil, "gitignore: " + dir + " is not in a git work tree; nothing was excluded by .gitignore"
		}
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		return nil, "gitignore: git ls-files failed (" + err.Error() + ": " + msg + "); nothing was excluded by .gitignore"
	}
	var out []string
	for _, p := range strings.Split(stdout.String(), "\x00") {
		if p != "" {
			out = append(out, p)
		}
	}
	return out, ""
}
