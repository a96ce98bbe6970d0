// Package gitservetest serves a file tree as a read-only git repository over git's smart HTTP
// protocol, for examples and benchmarks that need a real git server on the host: the tree is
// committed into a fresh bare repository in a temporary directory, and `git http-backend` runs
// behind net/http/cgi. Sandboxes reach it through an hutchd upstream (--upstream
// NAME=ADDR). It needs git on the host.
package gitservetest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Server is a running git server with one repository.
type Server struct {
	root string // temp dir: the work tree copy and the bare repository
	ln   net.Listener
	srv  *http.Server
	repo string
	done chan struct{} // closed when Serve's goroutine has returned
}

// Serve commits every file of project (one commit on branch "main") into a bare repository
// named repoName (for example "node-demo.git"; one path segment) in a new temporary directory,
// and serves it read-only (pushes are refused) over smart HTTP on addr ("127.0.0.1:0" picks a
// free port). The repository's URL is URL(). Close stops the server and removes the
// directory. Errors: a bad repoName, git missing or failing (its output is in the error), addr
// not available.
func Serve(ctx context.Context, project fs.FS, repoName, addr string) (*Server, error) {
	if repoName == "" || strings.ContainsAny(repoName, "/\\") || repoName == "." || repoName == ".." {
		return nil, fmt.Errorf("gitserve: repository name %q: want one path segment", repoName)
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("gitserve: %w", err)
	}
	root, err := os.MkdirTemp("", "hutch-gitserve-")
	if err != nil {
		return nil, err
	}
	s := &Server{root: root, repo: repoName, done: make(chan struct{})}
	if err := s.build(ctx, git, project); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("gitserve: %w", err)
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler: &cgi.Handler{
			Path: git,
			Args: []string{"http-backend"},
			Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(s.done)
		s.srv.Serve(ln)
	}()
	return s, nil
}

// build copies project into a work tree, commits it and clones it bare as s.repo.
func (s *Server) build(ctx context.Context, git string, project fs.FS) error {
	work := filepath.Join(s.root, "work")
	if err := os.CopyFS(work, project); err != nil {
		return fmt.Errorf("gitserve: copy project: %w", err)
	}
	bare := filepath.Join(s.root, s.repo)
	// The host's git configuration (signing, hooks, default branch) must not matter.
	base := []string{"-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null",
		"-c", "user.name=Hutch gitserve", "-c", "user.email=gitserve@hutch.invalid"}
	steps := [][]string{
		{"-C", work, "init", "-q", "-b", "main"},
		{"-C", work, "add", "-A"},
		{"-C", work, "commit", "-q", "--allow-empty", "-m", "project"},
		{"clone", "-q", "--bare", work, bare},
		{"-C", bare, "config", "http.receivepack", "false"},
	}
	for _, st := range steps {
		cmd := exec.CommandContext(ctx, git, append(append([]string{}, base...), st...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("gitserve: git %s: %w: %s", strings.Join(st, " "), err, out)
		}
	}
	return os.RemoveAll(work)
}

// Addr returns the listening address (host:port).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL returns the repository's URL on the host: http://<Addr>/<repoName>.
func (s *Server) URL() string { return "http://" + s.Addr() + "/" + s.repo }

// Close stops the server (open connections are closed) and removes the repository.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, os.RemoveAll(s.root))
}
