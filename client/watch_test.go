package client

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent"
)

// newAgentClient serves a real agent behind /v1/sandboxes/sb/ (as hutchd forwards it) and
// returns a handle on sandbox "sb" and the agent's workdir.
func newAgentClient(t *testing.T) (*Sandbox, string) {
	t.Helper()
	base := t.TempDir()
	srv, err := agent.New(agent.Config{Workdir: filepath.Join(base, "workspace"), StateDir: filepath.Join(base, "state"),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/v1/sandboxes/sb/")
		if !ok {
			http.NotFound(w, r)
			return
		}
		r.URL.Path = "/api/" + rest
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	c, err := New(hs.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	return c.SandboxHandle("sb"), filepath.Join(base, "workspace")
}

func TestWatchSDK(t *testing.T) {
	sb, workdir := newAgentClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := filepath.Join(workdir, "proj")
	if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := sb.Watch(ctx, dir, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Path() != dir || w.ID() == "" {
		t.Fatalf("Path %q ID %q", w.Path(), w.ID())
	}
	os.WriteFile(filepath.Join(dir, "node_modules", "x"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "a.go"), []byte("x"), 0o644)
	var got []WatchEvent
	removed := false
	for ev, err := range w.Events() {
		if err != nil {
			t.Fatalf("after %+v: %v", got, err)
		}
		got = append(got, ev)
		if ev.Kind == WatchKindEvent && ev.Path == filepath.Join(dir, "a.go") && !removed {
			removed = true
			os.RemoveAll(dir)
		}
	}
	if len(got) < 2 || got[0].EventType != WatchCreate || got[0].Path != filepath.Join(dir, "a.go") {
		t.Errorf("events %+v", got)
	}
	if last := got[len(got)-1]; last.Kind != WatchKindStopped || last.Reason == "" {
		t.Errorf("last event %+v", last)
	}
	for ev, err := range w.Events() {
		if err == nil {
			t.Errorf("second range yielded %+v", ev)
		}
	}

	// Close ends a blocked range with the context's error.
	w2, err := sb.Watch(ctx, workdir, WatchOptions{NoRecursive: true, Exclude: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, func() { w2.Close() })
	for _, err := range w2.Events() {
		if err == nil {
			continue
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("after Close: %v", err)
		}
	}

	_, err = sb.Watch(ctx, "relative", WatchOptions{})
	if !errdefs.IsCode(err, errdefs.CodeInvalidPath) {
		t.Errorf("relative path: %v", err)
	}
	_, err = sb.Watch(ctx, filepath.Join(workdir, "missing"), WatchOptions{})
	if !errdefs.IsCode(err, errdefs.CodeFileNotFound) {
		t.Errorf("missing path: %v", err)
	}
}

func TestCheckChangesSDK(t *testing.T) {
	sb, workdir := newAgentClient(t)
	ctx := context.Background()
	c, err := sb.CheckChanges(ctx, workdir, "")
	if err != nil || c.Status != ChangesResync || c.Version == "" {
		t.Fatalf("first: %+v %v", c, err)
	}
	v := c.Version
	if c, err = sb.CheckChanges(ctx, workdir, v); err != nil || c.Status != ChangesUnchanged {
		t.Fatalf("second: %+v %v", c, err)
	}
	os.WriteFile(filepath.Join(workdir, "f"), nil, 0o644)
	if c, err = sb.CheckChanges(ctx, workdir, v); err != nil || c.Status != ChangesChanged || c.Version == v {
		t.Fatalf("after a write: %+v %v", c, err)
	}
	if _, err = sb.CheckChanges(ctx, "/etc", ""); !errdefs.IsCode(err, errdefs.CodeInvalidPath) {
		t.Errorf("outside: %v", err)
	}
}
