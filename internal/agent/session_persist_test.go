package agent

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSessionsSurviveShutdown: an agent that shuts down (as at sleep) saves its sessions, and
// the next agent on the same disk serves them with their cwd and exported variables.
func TestSessionsSurviveShutdown(t *testing.T) {
	base := t.TempDir()
	sessionFile := filepath.Join(base, "var", "lib", "hutch-agent", "sessions.json")
	sockDir, err := os.MkdirTemp("", "hagent")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	serve := func() (*testAgent, func()) {
		srv, err := New(Config{
			Workdir: filepath.Join(base, "workspace"), StateDir: filepath.Join(base, "state"),
			Env: os.Environ(), SessionFile: sessionFile, Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		sock := filepath.Join(sockDir, "a.sock")
		ln, err := Listen(sock)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx, ln) }()
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}
		stop := func() {
			tr.CloseIdleConnections()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Serve did not return after cancel")
			}
		}
		return &testAgent{t: t, workdir: filepath.Join(base, "workspace"), client: &http.Client{Transport: tr}}, stop
	}
	a, stop := serve()
	a.mustPost("/api/session/create", obj{"id": "dev"})
	a.exec(obj{"command": "mkdir -p /tmp/hutch-persist && cd /tmp/hutch-persist && export TOKEN=abc", "sessionId": "dev"})
	defer os.RemoveAll("/tmp/hutch-persist")
	stop()
	if fi, err := os.Stat(sessionFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("session file after shutdown: %v %v", fi, err)
	}
	a, stop = serve()
	defer stop()
	if out := a.exec(obj{"command": "pwd; echo $TOKEN", "sessionId": "dev"}); out["stdout"] != "/tmp/hutch-persist\nabc\n" {
		t.Fatalf("session after restart: %v", out)
	}

	// POST /api/session/save writes them at once, without a shutdown (before a checkpoint).
	a.exec(obj{"command": "cd / && export TOKEN=def", "sessionId": "dev"})
	if out := a.mustPost("/api/session/save", nil); out["saved"] != float64(1) { // dev
		t.Fatalf("save: %v", out)
	}
	b, err := os.ReadFile(sessionFile)
	if err != nil || !strings.Contains(string(b), `"TOKEN":"def"`) {
		t.Fatalf("session file after save: %s, %v", b, err)
	}
	if code, _ := a.do(http.MethodGet, "/api/session/save", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /api/session/save = %d, want 405", code)
	}
}
