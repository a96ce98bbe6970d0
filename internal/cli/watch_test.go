package cli

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/agent"
	"github.com/hutchdev/hutch/internal/testutil"
)

// lockedBuffer is a bytes.Buffer safe for a writer and a concurrent reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// agentURL serves a real agent behind /v1/sandboxes/{any}/ as hutchd forwards it and returns
// its URL and workdir.
func agentURL(t *testing.T) (string, string) {
	t.Helper()
	base := t.TempDir()
	srv, err := agent.New(agent.Config{Workdir: filepath.Join(base, "workspace"), StateDir: filepath.Join(base, "state"),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.SplitN(r.URL.Path, "/", 5) // "", v1, sandboxes, id, rest
		if len(parts) != 5 {
			http.NotFound(w, r)
			return
		}
		r.URL.Path = "/api/" + parts[4]
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, filepath.Join(base, "workspace")
}

// runWatchCLI runs hutch watch with args; act is called once the watch is in place, and the
// command must end by itself (the test deletes the watched directory).
func runWatchCLI(t *testing.T, url string, act func(), args ...string) result {
	t.Helper()
	var out, errb lockedBuffer
	env := envOf(map[string]string{"HUTCH_URL": url, "HUTCH_TOKEN": "tok", "HUTCH_STATE_DIR": t.TempDir()})
	done := make(chan int, 1)
	go func() { done <- Main(t.Context(), args, strings.NewReader(""), &out, &errb, env) }()
	if !testutil.Poll(t, 10*time.Millisecond, 10*time.Second, func() bool { return strings.Contains(errb.String()+out.String(), "watch_") }) {
		t.Fatalf("watch did not start: %q %q", out.String(), errb.String())
	}
	act()
	select {
	case code := <-done:
		return result{code, out.String(), errb.String()}
	case <-time.After(10 * time.Second):
		t.Fatalf("hutch watch did not end: %q %q", out.String(), errb.String())
	}
	return result{}
}

func TestWatchCLI(t *testing.T) {
	url, workdir := agentURL(t)
	dir := filepath.Join(workdir, "w")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Text: one line per event; the command ends with the directory.
	res := runWatchCLI(t, url, func() {
		write("skip.log")
		if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		write("a.txt")
		time.Sleep(200 * time.Millisecond) // let the events out before the directory goes
		os.RemoveAll(dir)
	}, "watch", "sb", dir, "--exclude", "*.log")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	for _, want := range []string{"create " + dir + "/a.txt\n", "create " + dir + "/sub/\n", "stopped: the watched directory was deleted\n"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("stdout %q lacks %q", res.stdout, want)
		}
	}
	if strings.Contains(res.stdout, "skip.log") {
		t.Errorf("excluded file printed: %q", res.stdout)
	}

	// JSON lines.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	res = runWatchCLI(t, url, func() {
		write("b.txt")
		time.Sleep(200 * time.Millisecond)
		os.RemoveAll(dir)
	}, "watch", "sb", dir, "--json")
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	var first, second, last map[string]any
	for i, p := range []*map[string]any{&first, &second, &last} {
		idx := []int{0, 1, len(lines) - 1}[i]
		if err := json.Unmarshal([]byte(lines[idx]), p); err != nil {
			t.Fatalf("line %q: %v", lines[idx], err)
		}
	}
	if first["type"] != "watching" || second["type"] != "event" || second["eventType"] != "create" ||
		second["path"] != filepath.Join(dir, "b.txt") || second["isDirectory"] != false || last["type"] != "stopped" {
		t.Errorf("json lines %q", lines)
	}

	// Bad input: a clear error and exit 1.
	r := run(t, url, "", "watch", "sb", "relative/path")
	if r.code != 1 || !strings.Contains(r.stderr, "(INVALID_PATH)") {
		t.Errorf("relative: %+v", r)
	}
	r = run(t, url, "", "watch", "sb")
	if r.code != 2 {
		t.Errorf("missing PATH: %+v", r)
	}
}
