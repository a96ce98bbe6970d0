package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readWatchFrame reads one "event: X" + "data: {...}" frame, skipping comment lines, and
// checks that the event line and the data's type agree.
func readWatchFrame(t *testing.T, br *bufio.Reader) event {
	t.Helper()
	var name string
	var ev event
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read frame: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err != nil {
				t.Fatalf("data %q: %v", line, err)
			}
		case line == "":
			if ev == nil {
				continue
			}
			if name == "" || ev["type"] != name {
				t.Fatalf("frame event %q with data type %v", name, ev["type"])
			}
			return ev
		}
	}
}

func TestWatchStreamAgent(t *testing.T) {
	a := startAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := filepath.Join(a.workdir, "w")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	resp := a.openStream(ctx, "/api/watch", obj{"path": dir})
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	first := readWatchFrame(t, br)
	if first["type"] != "watching" || first["path"] != dir || !strings.HasPrefix(first["watchId"].(string), "watch_") {
		t.Fatalf("first frame %v", first)
	}
	f := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev := readWatchFrame(t, br)
	if ev["type"] != "event" || ev["eventType"] != "create" || ev["path"] != f || ev["isDirectory"] != false {
		t.Fatalf("event %v", ev)
	}
	if _, err := time.Parse(time.RFC3339Nano, ev["timestamp"].(string)); err != nil {
		t.Errorf("timestamp: %v", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for {
		ev = readWatchFrame(t, br)
		if ev["type"] == "stopped" {
			break
		}
	}
	if ev["reason"] != "the watched directory was deleted" {
		t.Errorf("stopped %v", ev)
	}
}

func TestWatchAbuseAgent(t *testing.T) {
	a := startAgent(t)
	file := filepath.Join(a.workdir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		body   obj
		status int
		code   string
	}{
		{"relative", obj{"path": "workspace"}, 400, "INVALID_PATH"},
		{"empty", obj{}, 400, "INVALID_PATH"},
		{"outside", obj{"path": "/etc"}, 400, "INVALID_PATH"},
		{"proc", obj{"path": "/proc/self"}, 400, "INVALID_PATH"},
		{"missing", obj{"path": filepath.Join(a.workdir, "nope")}, 404, "FILE_NOT_FOUND"},
		{"file", obj{"path": file}, 400, "NOT_DIRECTORY"},
		{"bad glob", obj{"path": a.workdir, "include": []string{"[x"}}, 400, "INVALID_PATTERN"},
		{"wrong type", obj{"path": a.workdir, "recursive": "yes"}, 400, "VALIDATION_FAILED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, out := a.post("/api/watch", c.body)
			wantError(t, status, out, c.status, c.code)
			if out["operation"] != "watch" {
				t.Errorf("operation %v", out["operation"])
			}
			if c.name == "bad glob" || c.name == "wrong type" {
				return
			}
			status, out = a.post("/api/watch/check", c.body)
			wantError(t, status, out, c.status, c.code)
		})
	}
	status, out := a.do(http.MethodGet, "/api/watch", nil)
	wantError(t, status, out, 405, "METHOD_NOT_ALLOWED")

	// The concurrent watch limit is explicit.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; ; i++ {
		resp := a.openStream(ctx, "/api/watch", obj{"path": a.workdir})
		if resp.StatusCode == http.StatusOK {
			defer resp.Body.Close()
			readWatchFrame(t, bufio.NewReader(resp.Body))
			continue
		}
		var env obj
		_ = json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || env["code"] != "WATCH_LIMIT_EXCEEDED" || i != 16 {
			t.Fatalf("watch %d: %d %v", i, resp.StatusCode, env)
		}
		break
	}
}

func TestWatchCheckAgent(t *testing.T) {
	a := startAgent(t)
	out := a.mustPost("/api/watch/check", obj{"path": a.workdir})
	if out["status"] != "resync" || out["version"] == "" {
		t.Fatalf("first check %v", out)
	}
	v := out["version"]
	if out = a.mustPost("/api/watch/check", obj{"path": a.workdir, "since": v}); out["status"] != "unchanged" || out["version"] != v {
		t.Fatalf("second check %v", out)
	}
	if err := os.WriteFile(filepath.Join(a.workdir, "n"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = a.mustPost("/api/watch/check", obj{"path": a.workdir, "since": v})
	if out["status"] != "changed" || out["version"] == v {
		t.Fatalf("after a write %v", out)
	}
	if out = a.mustPost("/api/watch/check", obj{"path": a.workdir, "since": "v1.x.1.0"}); out["status"] != "resync" {
		t.Fatalf("unknown version %v", out)
	}
}
