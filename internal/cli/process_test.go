package cli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
)

// fakeProcHutchd stands in for hutchd's process and port endpoints (the issue 3 contract's
// wire format). Sandbox "box" has process "web" (exited with code 3, output below) and a
// running process "db"; other process IDs are unknown.
type fakeProcHutchd struct {
	t *testing.T

	mu          sync.Mutex
	lastBody    map[string]any // guarded by mu
	lastQuery   url.Values     // guarded by mu
	streamConns int            // guarded by mu
	ports       map[int]string // port → token, guarded by mu
}

// webOut is process web's output, in order.
var webOut = []struct{ stream, data string }{
	{"stdout", "starting\n"},
	{"stderr", "warn 1\n"},
	{"stdout", "\xff\x00bin\n"},
	{"stdout", "listening on :3000\n"},
	{"stderr", "warn 2\n"},
}

func webStream(stream string) string {
	var b strings.Builder
	for _, c := range webOut {
		if c.stream == stream {
			b.WriteString(c.data)
		}
	}
	return b.String()
}

func newProcFake(t *testing.T) (*fakeProcHutchd, string) {
	f := &fakeProcHutchd{t: t, ports: map[int]string{}}
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *fakeProcHutchd) record(r *http.Request, body map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastBody, f.lastQuery = body, r.URL.Query()
}

func (f *fakeProcHutchd) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastBody, f.lastQuery = nil, nil
}

func (f *fakeProcHutchd) last() (map[string]any, url.Values) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastBody, f.lastQuery
}

var procRecords = map[string]map[string]any{
	"web": {"id": "web", "pid": 42, "command": "npm run dev", "status": "failed", "exitCode": 3,
		"startTime": "2025-01-01T00:00:00Z", "endTime": "2025-01-01T00:00:05Z", "sessionId": "default", "cwd": "/workspace"},
	"db": {"id": "db", "pid": 43, "command": "postgres\n  -D /data", "status": "running",
		"startTime": "2025-01-01T00:00:01Z", "sessionId": "default", "cwd": "/workspace"},
}

func (f *fakeProcHutchd) handler() http.Handler {
	t := f.t
	mux := http.NewServeMux()
	decode := func(r *http.Request) map[string]any {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("decode body: %v", err)
		}
		f.record(r, body)
		return body
	}
	proc := func(w http.ResponseWriter, r *http.Request) map[string]any {
		rec, ok := procRecords[r.PathValue("pid")]
		if !ok {
			envelope(w, errdefs.New(errdefs.CodeProcessNotFound, fmt.Sprintf("process %q not found", r.PathValue("pid"))))
		}
		return rec
	}
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		reply(w, 200, map[string]any{"id": body["id"], "status": "running", "createdAt": "2025-01-01T00:00:00Z"})
	})
	mux.HandleFunc("POST /v1/sandboxes/box/process/start", func(w http.ResponseWriter, r *http.Request) {
		body := decode(r)
		id, _ := body["processId"].(string)
		if id == "" {
			id = "proc_1_abcdef"
		}
		if id == "web" {
			envelope(w, errdefs.New(errdefs.CodeProcessExists, "process web already exists"))
			return
		}
		p := map[string]any{"id": id, "pid": 50, "command": body["command"], "status": "running",
			"startTime": "2025-01-01T00:00:00Z", "sessionId": "default", "cwd": "/workspace"}
		reply(w, 200, map[string]any{"success": true, "processId": id, "pid": 50, "command": body["command"], "process": p})
	})
	mux.HandleFunc("GET /v1/sandboxes/box/process/list", func(w http.ResponseWriter, r *http.Request) {
		f.record(r, nil)
		list := []any{procRecords["web"], procRecords["db"]}
		if r.URL.Query().Get("status") == "running" {
			list = []any{procRecords["db"]}
		}
		reply(w, 200, map[string]any{"success": true, "processes": list})
	})
	mux.HandleFunc("DELETE /v1/sandboxes/box/process/kill-all", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, map[string]any{"success": true, "cleanedCount": 2})
	})
	mux.HandleFunc("DELETE /v1/sandboxes/box/process/{pid}", func(w http.ResponseWriter, r *http.Request) {
		f.record(r, nil)
		if rec := proc(w, r); rec != nil {
			killed := map[string]any{"id": rec["id"], "pid": rec["pid"], "command": rec["command"], "status": "killed",
				"exitCode": 143, "startTime": rec["startTime"]}
			reply(w, 200, map[string]any{"success": true, "processId": rec["id"], "killed": true, "process": killed})
		}
	})
	mux.HandleFunc("GET /v1/sandboxes/box/process/{pid}/logs", func(w http.ResponseWriter, r *http.Request) {
		if proc(w, r) != nil {
			out, errOut := webStream("stdout"), webStream("stderr")
			reply(w, 200, map[string]any{"success": true, "processId": "web", "encoding": "base64",
				"stdout": base64.StdEncoding.EncodeToString([]byte(out)), "stderr": base64.StdEncoding.EncodeToString([]byte(errOut)),
				"stdoutOffset": 0, "stdoutEnd": len(out), "stdoutDropped": 0,
				"stderrOffset": 0, "stderrEnd": len(errOut), "stderrDropped": 0, "status": "failed", "exitCode": 3})
		}
	})
	mux.HandleFunc("GET /v1/sandboxes/box/process/{pid}/stream", f.stream)
	mux.HandleFunc("POST /v1/sandboxes/box/process/{pid}/wait-log", func(w http.ResponseWriter, r *http.Request) {
		body := decode(r)
		switch body["pattern"] {
		case "never":
			envelope(w, errdefs.New(errdefs.CodeProcessExitedEarly, "process exited with code 1 before a line matched").
				With("exitCode", 1).With("status", "failed"))
		default:
			reply(w, 200, map[string]any{"success": true, "line": "listening on :3000", "match": []string{"listening"}, "stream": "stdout"})
		}
	})
	mux.HandleFunc("POST /v1/sandboxes/box/process/{pid}/wait-port", func(w http.ResponseWriter, r *http.Request) {
		body := decode(r)
		if body["mode"] == "tcp" {
			reply(w, 200, map[string]any{"success": true, "port": body["port"]})
			return
		}
		reply(w, 200, map[string]any{"success": true, "port": body["port"], "statusCode": 200})
	})
	mux.HandleFunc("POST /v1/sandboxes/box/ports", func(w http.ResponseWriter, r *http.Request) {
		body := decode(r)
		port := int(body["port"].(float64))
		if port < 1024 {
			envelope(w, errdefs.New(errdefs.CodeInvalidPort, "port must be 1024-65535").With("port", port))
			return
		}
		token, _ := body["token"].(string)
		if token == "" {
			token = "abcdefgh12345678"
		}
		f.mu.Lock()
		f.ports[port] = token
		f.mu.Unlock()
		reply(w, 200, map[string]any{"success": true, "port": port, "name": body["name"], "token": token,
			"url": fmt.Sprintf("http://%d-box-%s.hutch.localhost:8080/", port, token)})
	})
	mux.HandleFunc("GET /v1/sandboxes/box/ports", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		list := []any{}
		for port, token := range f.ports {
			list = append(list, map[string]any{"port": port, "name": "web", "token": token, "exposedAt": "2025-01-01T00:00:00Z",
				"url": fmt.Sprintf("http://%d-box-%s.hutch.localhost:8080/", port, token)})
		}
		reply(w, 200, map[string]any{"success": true, "ports": list})
	})
	mux.HandleFunc("DELETE /v1/sandboxes/box/ports/{port}", func(w http.ResponseWriter, r *http.Request) {
		port, _ := strconv.Atoi(r.PathValue("port"))
		f.mu.Lock()
		_, ok := f.ports[port]
		delete(f.ports, port)
		f.mu.Unlock()
		if !ok {
			envelope(w, errdefs.New(errdefs.CodePortNotExposed, fmt.Sprintf("port %d is not exposed", port)))
			return
		}
		reply(w, 200, map[string]any{"success": true, "port": port})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			envelope(w, errdefs.New(errdefs.CodeUnauthenticated, "missing or wrong token"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// stream serves web's log stream from the requested offsets; the first connection is cut
// after two output frames, and stdout bytes below 2 are no longer held.
func (f *fakeProcHutchd) stream(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("pid") != "web" {
		envelope(w, errdefs.New(errdefs.CodeProcessNotFound, "process not found"))
		return
	}
	f.mu.Lock()
	f.streamConns++
	first := f.streamConns == 1
	f.mu.Unlock()
	from := map[string]int{}
	for _, s := range []string{"stdout", "stderr"} {
		from[s], _ = strconv.Atoi(r.URL.Query().Get(s + "Offset"))
	}
	sw := sse.NewWriter(w)
	_ = sw.Send(map[string]any{"type": "process_info", "processId": "web", "command": "npm run dev", "status": "failed", "pid": 42})
	if from["stdout"] < 2 {
		_ = sw.Send(map[string]any{"type": "dropped", "stream": "stdout", "from": from["stdout"], "to": 2})
		from["stdout"] = 2
	}
	pos := map[string]int{}
	frames := 0
	for _, c := range webOut {
		off := pos[c.stream]
		pos[c.stream] += len(c.data)
		data := c.data
		if off+len(data) <= from[c.stream] {
			continue
		}
		if off < from[c.stream] {
			data, off = data[from[c.stream]-off:], from[c.stream]
		}
		_ = sw.Send(map[string]any{"type": c.stream, "processId": "web", "offset": off,
			"data": base64.StdEncoding.EncodeToString([]byte(data)), "encoding": "base64"})
		if frames++; first && frames == 2 {
			panic(http.ErrAbortHandler)
		}
	}
	_ = sw.Send(map[string]any{"type": "exit", "processId": "web", "exitCode": 3, "status": "failed",
		"data": "Process failed with exit code 3"})
}

func TestSpawnCommand(t *testing.T) {
	f, url := newProcFake(t)
	r := run(t, url, "", "spawn", "box", "--id", "api", "-w", "/app", "-e", "PORT=3000", "-s", "s1",
		"--log-buffer", "65536", "--", "node", "server.js")
	body, _ := f.last()
	env, _ := body["env"].(map[string]any)
	if r.code != 0 || r.stdout != "api\n" || r.stderr != "" {
		t.Errorf("spawn = %+v", r)
	}
	if body["command"] != "'node' 'server.js'" || body["processId"] != "api" || body["cwd"] != "/app" ||
		body["sessionId"] != "s1" || body["logBufferBytes"] != 65536.0 || env["PORT"] != "3000" {
		t.Errorf("start body = %v", body)
	}

	// Readiness: the log, then the port; the ID comes first on stdout.
	r = run(t, url, "", "spawn", "box", "--wait-log", "listening", "--wait-port", "3000", "--wait-path", "/health",
		"--wait-timeout", "30s", "--", "npm run dev")
	body, _ = f.last()
	if r.code != 0 || r.stdout != "proc_1_abcdef\n" ||
		r.stderr != "proc_1_abcdef ready: stdout: listening on :3000\nproc_1_abcdef ready: port 3000 answered HTTP 200\n" {
		t.Errorf("spawn with waits = %+v", r)
	}
	if body["port"] != 3000.0 || body["path"] != "/health" || body["timeoutMs"] != 30000.0 || body["mode"] != nil {
		t.Errorf("wait-port body = %v", body)
	}
	r = run(t, url, "", "spawn", "box", "--wait-port", "5432", "--wait-tcp", "--", "postgres")
	if body, _ = f.last(); r.code != 0 || body["mode"] != "tcp" || !strings.Contains(r.stderr, "port 5432 accepts connections") {
		t.Errorf("spawn --wait-tcp = %+v, body %v", r, body)
	}

	r = run(t, url, "", "spawn", "box", "--json", "--", "true")
	var info map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || info["id"] != "proc_1_abcdef" || info["pid"] != 50.0 {
		t.Errorf("spawn --json = %q (%v)", r.stdout, err)
	}

	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"exited before ready", []string{"spawn", "box", "--wait-log", "never", "--", "false"}, ExitError,
			"proc_1_abcdef\n", "(PROCESS_EXITED_BEFORE_READY)"},
		{"id in use", []string{"spawn", "box", "--id", "web", "--", "x"}, ExitError, "", "(PROCESS_ALREADY_EXISTS)"},
		{"no command", []string{"spawn", "box"}, ExitUsage, "", "want NAME -- CMD"},
		{"bad env", []string{"spawn", "-e", "X", "box", "--", "x"}, ExitUsage, "", "KEY=VALUE"},
		{"negative timeout", []string{"spawn", "--wait-timeout", "-1s", "box", "--", "x"}, ExitUsage, "", "negative"},
		{"path without port", []string{"spawn", "--wait-path", "/", "box", "--", "x"}, ExitUsage, "", "need --wait-port"},
		{"bad port", []string{"spawn", "--wait-port", "70000", "box", "--", "x"}, ExitUsage, "", "1-65535"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, url, "", tt.args...)
			if r.code != tt.wantCode || r.stdout != tt.wantOut || !strings.HasPrefix(r.stderr, "hutch: ") ||
				!strings.Contains(r.stderr, tt.wantErr) {
				t.Errorf("hutch %q = %+v; want code %d, stdout %q, stderr with %q", tt.args, r, tt.wantCode, tt.wantOut, tt.wantErr)
			}
		})
	}
}

func TestPsCommand(t *testing.T) {
	f, url := newProcFake(t)
	r := run(t, url, "", "ps", "box")
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 3 {
		t.Fatalf("ps = %+v", r)
	}
	for i, want := range [][]string{
		{"ID", "PID", "STATUS", "EXIT", "STARTED", "COMMAND"},
		{"web", "42", "failed", "3"},
		{"db", "43", "running", "-"},
	} {
		fields := strings.Fields(lines[i])
		for j, w := range want {
			if j >= len(fields) || fields[j] != w {
				t.Errorf("ps line %d = %q; want fields %v", i, lines[i], want)
				break
			}
		}
	}
	if !strings.HasSuffix(lines[1], "npm run dev") || !strings.HasSuffix(lines[2], "postgres -D /data") {
		t.Errorf("ps commands = %q", r.stdout)
	}
	if _, q := f.last(); q.Has("status") {
		t.Errorf("ps sent %v", q)
	}
	r = run(t, url, "", "ps", "box", "--running", "--json")
	var list []map[string]any
	if _, q := f.last(); r.code != 0 || q.Get("status") != "running" {
		t.Errorf("ps --running = %+v, query %v", r, q)
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || list[0]["id"] != "db" {
		t.Errorf("ps --json = %q (%v)", r.stdout, err)
	}
	if r = run(t, url, "", "ps"); r.code != ExitUsage {
		t.Errorf("ps without NAME = %+v", r)
	}
}

func TestLogsCommand(t *testing.T) {
	f, url := newProcFake(t)
	r := run(t, url, "", "logs", "box", "web")
	if r.code != 0 || r.stdout != webStream("stdout") || r.stderr != webStream("stderr") {
		t.Errorf("logs = %+v", r)
	}

	// -f: the held output from where it is still held, reconnecting after the cut, exact bytes,
	// then the process's exit code.
	r = run(t, url, "", "logs", "-f", "box", "web")
	wantErr := "[hutch: 2 earlier bytes of stdout were dropped]\n" + webStream("stderr")
	if r.code != 3 || r.stdout != webStream("stdout")[2:] || r.stderr != wantErr {
		t.Errorf("logs -f = %+v; want code 3, stdout %q, stderr %q", r, webStream("stdout")[2:], wantErr)
	}
	if f.mu.Lock(); f.streamConns != 2 {
		t.Errorf("logs -f used %d connections; want 2 (one reconnection)", f.streamConns)
	}
	f.mu.Unlock()

	if r = run(t, url, "", "logs", "box", "ghost"); r.code != ExitError || !strings.Contains(r.stderr, "(PROCESS_NOT_FOUND)") {
		t.Errorf("logs ghost = %+v", r)
	}
	if r = run(t, url, "", "logs", "-f", "box", "ghost"); r.code != ExitHutchFailed || !strings.Contains(r.stderr, "(PROCESS_NOT_FOUND)") {
		t.Errorf("logs -f ghost = %+v", r)
	}
	if r = run(t, url, "", "logs", "box"); r.code != ExitUsage {
		t.Errorf("logs without ID = %+v", r)
	}
}

func TestKillCommand(t *testing.T) {
	f, url := newProcFake(t)
	tests := []struct {
		args      []string
		wantOut   string
		wantGrace string // "" = no graceMs parameter
	}{
		{[]string{"kill", "box", "db"}, "db killed (exit 143)\n", ""},
		{[]string{"kill", "box", "db", "--grace", "2s"}, "db killed (exit 143)\n", "2000"},
		{[]string{"kill", "--grace", "0", "box", "db"}, "db killed (exit 143)\n", "0"},
		{[]string{"kill", "box", "--all"}, "killed 2 process(es)\n", ""},
	}
	for _, tt := range tests {
		f.reset()
		r := run(t, url, "", tt.args...)
		_, q := f.last()
		if r.code != 0 || r.stdout != tt.wantOut || q.Get("graceMs") != tt.wantGrace {
			t.Errorf("hutch %q = %+v, query %v; want %q, graceMs %q", tt.args, r, q, tt.wantOut, tt.wantGrace)
		}
	}
	failures := []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{[]string{"kill", "box", "ghost"}, ExitError, "(PROCESS_NOT_FOUND)"},
		{[]string{"kill", "box"}, ExitUsage, "NAME ID, or NAME --all"},
		{[]string{"kill", "box", "web", "--all"}, ExitUsage, "NAME only"},
		{[]string{"kill", "box", "--all", "--grace", "1s"}, ExitUsage, "does not apply"},
		{[]string{"kill", "box", "web", "--grace", "-1s"}, ExitUsage, "negative"},
	}
	for _, tt := range failures {
		if r := run(t, url, "", tt.args...); r.code != tt.wantCode || !strings.Contains(r.stderr, tt.wantErr) {
			t.Errorf("hutch %q = %+v; want code %d and %q", tt.args, r, tt.wantCode, tt.wantErr)
		}
	}
}

// TestStartFlagsNeedCommand checks that process flags on `hutch start NAME` without -- CMD are a
// usage error instead of being ignored, and that a plain `hutch start NAME` (with global flags)
// still starts the sandbox.
func TestStartFlagsNeedCommand(t *testing.T) {
	var started bool
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/box/start", func(w http.ResponseWriter, r *http.Request) {
		started = true
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"box","status":"running"}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	if r := run(t, srv.URL, "", "start", "box", "--id", "x"); r.code != ExitUsage || started {
		t.Fatalf("start box --id x = exit %d (started %v), stderr %q; want a usage error", r.code, started, r.stderr)
	}
	if r := run(t, srv.URL, "", "start", "box"); r.code != 0 || !started {
		t.Fatalf("start box = exit %d, stderr %q; want the sandbox started", r.code, r.stderr)
	}
}
