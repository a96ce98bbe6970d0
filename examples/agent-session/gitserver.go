package main

import (
	"context"
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

// serveRepo turns the project directory into a bare repository named repoName under a temp
// root and serves it over git's smart HTTP protocol (git http-backend through CGI) on addr. It
// returns a stop function.
func serveRepo(ctx context.Context, projectFS fs.FS, repoName, addr string) (stop func(), err error) {
	root, err := os.MkdirTemp("", "hutch-example-git-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { os.RemoveAll(root) }
	work := filepath.Join(root, "work")
	if err := os.CopyFS(work, projectFS); err != nil {
		cleanup()
		return nil, fmt.Errorf("copy project: %w", err)
	}
	bare := filepath.Join(root, repoName)
	steps := [][]string{
		{"git", "-C", work, "init", "-q", "-b", "main"},
		{"git", "-C", work, "add", "-A"},
		{"git", "-C", work, "-c", "user.name=Hutch Example", "-c", "user.email=example@hutch.invalid", "commit", "-q", "-m", "node demo"},
		{"git", "clone", "-q", "--bare", work, bare},
		{"git", "-C", bare, "config", "http.receivepack", "false"},
	}
	for _, s := range steps {
		if out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput(); err != nil {
			cleanup()
			return nil, fmt.Errorf("%s: %w: %s", strings.Join(s, " "), err, out)
		}
	}
	backend, err := exec.LookPath("git")
	if err != nil {
		cleanup()
		return nil, err
	}
	h := &cgi.Handler{
		Path: backend,
		Args: []string{"http-backend"},
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("git server: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return func() {
		srv.Close()
		cleanup()
	}, nil
}
