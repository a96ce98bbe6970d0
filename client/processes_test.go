package client

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
)

// chunk is one write of a fake process to one of its streams.
type chunk struct {
	stream string // "stdout" or "stderr"
	data   []byte
}

// fakeProcs is a stand-in for the process endpoints of hutchd, emitting the contract's wire
// format (docs/issue3 contract) for one process "web" of sandbox "box" whose output is a fixed
// list of chunks and which has exited with code 0.
type fakeProcs struct {
	t      *testing.T
	chunks []chunk

	mu sync.Mutex
	// held are the first offsets the server still holds; a request below them gets a dropped
	// event.
	held LogOffsets
	// cutEvery makes the stream connection end after this many output frames, for the first
	// cuts connections (cuts < 0: all of them).
	cutEvery, cuts int
	// endEarly ends every stream connection after its output, without the exit event.
	endEarly bool
	// abort cuts with a broken connection instead of a clean end of the body.
	abort bool
	// rewind makes the server resend this many bytes before the requested offsets (a
	// non-conforming server), to check the client never yields a byte twice.
	rewind int64
	// refuseAfter makes stream requests after the first this many fail with refuseErr.
	refuseAfter int
	refuseErr   error

	streamQueries []url.Values     // guarded by mu
	lastBody      map[string]any   // guarded by mu
	lastQuery     url.Values       // guarded by mu
	connections   int              // guarded by mu
	released      chan struct{}    // closed to end a blocked stream (unused when nil)
	info          map[string]any   // the process record
	bodies        []map[string]any // every JSON body, guarded by mu
}

func newFakeProcs(t *testing.T, chunks ...chunk) *fakeProcs {
	return &fakeProcs{t: t, chunks: chunks, info: map[string]any{
		"id": "web", "pid": 42, "command": "npm run dev", "status": "completed",
		"startTime": "2025-01-01T00:00:00.5Z", "endTime": "2025-01-01T00:00:02Z", "exitCode": 0,
		"sessionId": "default", "cwd": "/workspace",
	}}
}

// output returns the bytes of one stream.
func (f *fakeProcs) output(stream string) []byte {
	var b []byte
	for _, c := range f.chunks {
		if c.stream == stream {
			b = append(b, c.data...)
		}
	}
	return b
}

func (f *fakeProcs) record(r *http.Request, body map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastQuery = r.URL.Query()
	f.lastBody = body
	if body != nil {
		f.bodies = append(f.bodies, body)
	}
}

func (f *fakeProcs) last() (map[string]any, url.Values) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastBody, f.lastQuery
}

func okReply(v map[string]any) map[string]any {
	v["success"] = true
	v["timestamp"] = "2025-01-01T00:00:03Z"
	return v
}

func (f *fakeProcs) handler() *http.ServeMux {
	t := f.t
	mux := http.NewServeMux()
	known := func(w http.ResponseWriter, r *http.Request) bool {
		if r.PathValue("pid") != "web" {
			writeEnvelope(w, errdefs.New(errdefs.CodeProcessNotFound, "process "+r.PathValue("pid")+" not found").
				With("processId", r.PathValue("pid")))
			return false
		}
		return true
	}
	mux.HandleFunc("POST /v1/sandboxes/box/process/start", func(w http.ResponseWriter, r *http.Request) {
		body := readJSON(t, r)
		f.record(r, body)
		if body["command"] == "" {
			writeEnvelope(w, errdefs.New(errdefs.CodeInvalidCommand, "command is empty"))
			return
		}
		if body["processId"] == "taken" {
			writeEnvelope(w, errdefs.New(errdefs.CodeProcessExists, "process taken already exists"))
			return
		}
		proc := map[string]any{"id": "proc_1_abcdef", "pid": 77, "command": body["command"], "status": "running",
			"startTime": "2025-01-01T00:00:00.5Z", "sessionId": body["sessionId"], "cwd": "/workspace"}
		if id, _ := body["processId"].(string); id != "" {
			proc["id"] = id
		}
		writeJSON(w, 200, okReply(map[string]any{"processId": proc["id"], "pid": 77, "command": body["command"], "process": proc}))
	})
	mux.HandleFunc("GET /v1/sandboxes/box/process/list", func(w http.ResponseWriter, r *http.Request) {
		f.record(r, nil)
		list := []any{f.info}
		if r.URL.Query().Get("status") == "running" {
			list = []any{}
		}
		writeJSON(w, 200, okReply(map[string]any{"processes": list}))
	})
	mux.HandleFunc("DELETE /v1/sandboxes/box/process/kill-all", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, okReply(map[string]any{"cleanedCount": 3}))
	})
	mux.HandleFunc("GET /v1/sandboxes/box/process/{pid}", func(w http.ResponseWriter, r *http.Request) {
		if known(w, r) {
			writeJSON(w, 200, okReply(map[string]any{"process": f.info}))
		}
	})
	mux.HandleFunc("DELETE /v1/sandboxes/box/process/{pid}", func(w http.ResponseWriter, r *http.Request) {
		f.record(r, nil)
		if known(w, r) {
			killed := map[string]any{}
			for k, v := range f.info {
				killed[k] = v
			}
			killed["status"], killed["exitCode"] = "killed", 143
			writeJSON(w, 200, okReply(map[string]any{"processId": "web", "killed": true, "process": killed}))
		}
	})
	mux.HandleFunc("GET /v1/sandboxes/box/process/{pid}/logs", func(w http.ResponseWriter, r *http.Request) {
		if !known(w, r) {
			return
		}
		out, errOut := f.output("stdout"), f.output("stderr")
		reply := map[string]any{"processId": "web", "status": "completed", "exitCode": 0,
			"stdoutOffset": 0, "stdoutEnd": len(out), "stdoutDropped": 0,
			"stderrOffset": 0, "stderrEnd": len(errOut), "stderrDropped": 0}
		if utf8.Valid(out) && utf8.Valid(errOut) {
			reply["stdout"], reply["stderr"] = string(out), string(errOut)
		} else {
			reply["encoding"] = "base64"
			reply["stdout"] = base64.StdEncoding.EncodeToString(out)
			reply["stderr"] = base64.StdEncoding.EncodeToString(errOut)
		}
		writeJSON(w, 200, okReply(reply))
	})
	mux.HandleFunc("POST /v1/sandboxes/box/process/{pid}/wait-log", func(w http.ResponseWriter, r *http.Request) {
		body := readJSON(t, r)
		f.record(r, body)
		if !known(w, r) {
			return
		}
		switch {
		case body["pattern"] == "never":
			writeEnvelope(w, errdefs.New(errdefs.CodeProcessReadyTimeout, "no matching line").With("timeoutMs", body["timeoutMs"]))
		case body["text"] == "gone":
			writeEnvelope(w, errdefs.New(errdefs.CodeProcessExitedEarly, "process exited").
				With("processId", "web").With("exitCode", 1).With("status", "failed"))
		default:
			writeJSON(w, 200, okReply(map[string]any{"line": "listening on :3000", "match": []string{"on :3000", "3000"},
				"groups": map[string]string{"port": "3000"}, "stream": "stdout"}))
		}
	})
	mux.HandleFunc("POST /v1/sandboxes/box/process/{pid}/wait-port", func(w http.ResponseWriter, r *http.Request) {
		body := readJSON(t, r)
		f.record(r, body)
		if known(w, r) {
			writeJSON(w, 200, okReply(map[string]any{"port": body["port"], "statusCode": 204}))
		}
	})
	mux.HandleFunc("POST /v1/sandboxes/box/process/{pid}/wait-exit", func(w http.ResponseWriter, r *http.Request) {
		body := readJSON(t, r)
		f.record(r, body)
		if known(w, r) {
			writeJSON(w, 200, okReply(map[string]any{"processId": "web", "exitCode": 3, "status": "failed"}))
		}
	})
	mux.HandleFunc("GET /v1/sandboxes/box/process/{pid}/stream", f.stream)
	return mux
}

// stream serves the SSE log stream from the requested offsets, as the contract describes.
func (f *fakeProcs) stream(w http.ResponseWriter, r *http.Request) {
	t := f.t
	if r.Header.Get("Accept") != "text/event-stream" {
		t.Errorf("stream Accept = %q", r.Header.Get("Accept"))
	}
	f.mu.Lock()
	f.streamQueries = append(f.streamQueries, r.URL.Query())
	f.connections++
	conn := f.connections
	cutThis := f.cutEvery > 0 && (f.cuts < 0 || conn <= f.cuts)
	refuse := f.refuseErr != nil && conn > f.refuseAfter
	f.mu.Unlock()
	if r.PathValue("pid") != "web" {
		writeEnvelope(w, errdefs.New(errdefs.CodeProcessNotFound, "process not found"))
		return
	}
	if refuse {
		writeEnvelope(w, f.refuseErr)
		return
	}
	want := map[string]int64{"stdout": 0, "stderr": 0}
	for _, s := range []string{"stdout", "stderr"} {
		if v := r.URL.Query().Get(s + "Offset"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Errorf("bad %sOffset %q", s, v)
			}
			want[s] = max(0, n-f.rewind)
		}
	}
	sw := sse.NewWriter(w)
	send := func(ev map[string]any) {
		ev["timestamp"] = "2025-01-01T00:00:01Z"
		if err := sw.Send(ev); err != nil {
			t.Logf("send: %v", err)
		}
	}
	send(map[string]any{"type": "process_info", "processId": "web", "command": "npm run dev", "status": "running", "pid": 42})
	held := map[string]int64{"stdout": f.held.Stdout, "stderr": f.held.Stderr}
	for _, s := range []string{"stdout", "stderr"} {
		if want[s] < held[s] {
			send(map[string]any{"type": "dropped", "stream": s, "from": want[s], "to": held[s]})
			want[s] = held[s]
		}
	}
	pos := map[string]int64{}
	frames := 0
	for _, c := range f.chunks {
		off := pos[c.stream]
		pos[c.stream] += int64(len(c.data))
		data := c.data
		if off+int64(len(data)) <= want[c.stream] {
			continue
		}
		if off < want[c.stream] {
			data = data[want[c.stream]-off:]
			off = want[c.stream]
		}
		ev := map[string]any{"type": c.stream, "processId": "web", "offset": off}
		if utf8.Valid(data) {
			ev["data"] = string(data)
		} else {
			ev["data"], ev["encoding"] = base64.StdEncoding.EncodeToString(data), "base64"
		}
		send(ev)
		frames++
		if cutThis && frames == f.cutEvery {
			if f.abort {
				panic(http.ErrAbortHandler)
			}
			return
		}
	}
	if f.endEarly {
		return
	}
	if f.released != nil {
		select {
		case <-f.released:
		case <-r.Context().Done():
			return
		}
	}
	send(map[string]any{"type": "exit", "processId": "web", "exitCode": 0, "status": "completed",
		"data": "Process completed with exit code 0"})
}

func TestStartProcess(t *testing.T) {
	f := newFakeProcs(t)
	c := newTestClient(t, f.handler())
	sb := c.SandboxHandle("box")

	p, err := sb.StartProcess(t.Context(), "npm run dev", ProcessOptions{ID: "web1", SessionID: "s1",
		Env: map[string]string{"PORT": "3000"}, Cwd: "/app", LogBufferBytes: 1 << 20})
	if err != nil {
		t.Fatalf("StartProcess = %v", err)
	}
	body, _ := f.last()
	env, _ := body["env"].(map[string]any)
	if body["command"] != "npm run dev" || body["processId"] != "web1" || body["sessionId"] != "s1" ||
		body["cwd"] != "/app" || body["logBufferBytes"] != float64(1<<20) || env["PORT"] != "3000" {
		t.Errorf("start body = %v", body)
	}
	info := p.Info()
	if p.ID() != "web1" || info.ID != "web1" || info.PID != 77 || info.Status != ProcessRunning ||
		info.ExitCode != nil || info.Command != "npm run dev" || info.SessionID != "s1" ||
		!info.StartTime.Equal(time.Date(2025, 1, 1, 0, 0, 0, 5e8, time.UTC)) || !info.EndTime.IsZero() {
		t.Errorf("started process = %q %+v", p.ID(), info)
	}

	// Defaults: no optional fields on the wire; a *Session sends its own ID.
	p, err = sb.StartProcess(t.Context(), "sleep 1", ProcessOptions{})
	body, _ = f.last()
	if err != nil || p.ID() != "proc_1_abcdef" || len(body) != 1 {
		t.Errorf("StartProcess with defaults = %v, %v; body %v", p, err, body)
	}
	if _, err := sb.Session("s2").StartProcess(t.Context(), "true", ProcessOptions{SessionID: "ignored"}); err != nil {
		t.Fatal(err)
	}
	if body, _ = f.last(); body["sessionId"] != "s2" {
		t.Errorf("session start body = %v", body)
	}

	tests := []struct {
		command string
		opts    ProcessOptions
		code    errdefs.Code
		class   error
	}{
		{"", ProcessOptions{}, errdefs.CodeInvalidCommand, errdefs.ErrInvalidArgument},
		{"x", ProcessOptions{ID: "taken"}, errdefs.CodeProcessExists, errdefs.ErrAlreadyExists},
	}
	for _, tt := range tests {
		_, err := sb.StartProcess(t.Context(), tt.command, tt.opts)
		if !errdefs.IsCode(err, tt.code) || !errors.Is(err, tt.class) {
			t.Errorf("StartProcess(%q, %+v) = %v; want %s", tt.command, tt.opts, err, tt.code)
		}
	}
}

func TestProcessRecords(t *testing.T) {
	f := newFakeProcs(t)
	c := newTestClient(t, f.handler())
	sb := c.SandboxHandle("box")
	ctx := t.Context()

	list, err := sb.ListProcesses(ctx, "")
	if err != nil || len(list) != 1 || list[0].ID != "web" || list[0].ExitCode == nil || *list[0].ExitCode != 0 ||
		list[0].Status != ProcessCompleted || !list[0].Status.Done() || list[0].EndTime.IsZero() {
		t.Fatalf("ListProcesses = %+v, %v", list, err)
	}
	if _, q := f.last(); q.Has("status") {
		t.Errorf("list without a filter sent %v", q)
	}
	list, err = sb.ListProcesses(ctx, "running")
	if _, q := f.last(); err != nil || len(list) != 0 || q.Get("status") != "running" {
		t.Errorf("ListProcesses(running) = %v, %v; query %v", list, err, q)
	}

	p, err := sb.GetProcess(ctx, "web")
	if err != nil || p.Info().PID != 42 || p.Info().Cwd != "/workspace" {
		t.Fatalf("GetProcess(web) = %+v, %v", p, err)
	}
	_, err = sb.GetProcess(ctx, "nope")
	var e *errdefs.Error
	if !errors.As(err, &e) || e.Code != errdefs.CodeProcessNotFound || !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetProcess(nope) = %v; want *errdefs.Error PROCESS_NOT_FOUND", err)
	}
	if _, err := sb.Process("").Refresh(ctx); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Refresh of an empty ID = %v; want ErrInvalidArgument", err)
	}

	// A handle without a call knows only its ID; Refresh fills it.
	h := sb.Process("web")
	if h.Info().ID != "web" || h.Info().PID != 0 {
		t.Errorf("fresh handle Info = %+v", h.Info())
	}
	if info, err := h.Refresh(ctx); err != nil || info.PID != 42 || h.Info().PID != 42 {
		t.Errorf("Refresh = %+v, %v", info, err)
	}
	// Info returns a copy.
	*h.Info().ExitCode = 99
	if *h.Info().ExitCode != 0 {
		t.Error("Info shares its ExitCode with the handle")
	}

	n, err := sb.KillAllProcesses(ctx)
	if err != nil || n != 3 {
		t.Errorf("KillAllProcesses = %d, %v", n, err)
	}
}

func TestKillGrace(t *testing.T) {
	f := newFakeProcs(t)
	c := newTestClient(t, f.handler())
	p := c.SandboxHandle("box").Process("web")
	tests := []struct {
		grace time.Duration
		want  string // "" means no graceMs parameter
	}{
		{-1, ""},
		{0, "0"},
		{time.Nanosecond, "1"},
		{1500 * time.Millisecond, "1500"},
		{2 * time.Second, "2000"},
	}
	for _, tt := range tests {
		info, err := p.Kill(t.Context(), tt.grace)
		_, q := f.last()
		if err != nil || info.Status != ProcessKilled || *info.ExitCode != 143 || p.Info().Status != ProcessKilled {
			t.Errorf("Kill(%v) = %+v, %v", tt.grace, info, err)
		}
		if q.Has("graceMs") != (tt.want != "") || q.Get("graceMs") != tt.want {
			t.Errorf("Kill(%v) sent query %v; want graceMs=%q", tt.grace, q, tt.want)
		}
	}
	if _, err := c.SandboxHandle("box").Process("ghost").Kill(t.Context(), -1); !errdefs.IsCode(err, errdefs.CodeProcessNotFound) {
		t.Errorf("Kill(ghost) = %v; want PROCESS_NOT_FOUND", err)
	}
}

func TestProcessLogs(t *testing.T) {
	bin := []byte{0xff, 0xfe, 'x'}
	tests := []struct {
		name   string
		chunks []chunk
	}{
		{"text", []chunk{{"stdout", []byte("héllo\n")}, {"stderr", []byte("warn\n")}, {"stdout", []byte("bye\n")}}},
		{"binary", []chunk{{"stdout", bin}, {"stderr", []byte("text\n")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeProcs(t, tt.chunks...)
			c := newTestClient(t, f.handler())
			logs, err := c.SandboxHandle("box").Process("web").Logs(t.Context())
			if err != nil {
				t.Fatalf("Logs = %v", err)
			}
			out, errOut := f.output("stdout"), f.output("stderr")
			if string(logs.Stdout) != string(out) || string(logs.Stderr) != string(errOut) {
				t.Errorf("Logs = %q / %q; want %q / %q", logs.Stdout, logs.Stderr, out, errOut)
			}
			if logs.ProcessID != "web" || logs.Status != ProcessCompleted || logs.ExitCode == nil ||
				logs.StdoutEnd != int64(len(out)) || logs.StderrEnd != int64(len(errOut)) ||
				logs.Next() != (LogOffsets{int64(len(out)), int64(len(errOut))}) {
				t.Errorf("Logs = %+v", logs)
			}
		})
	}
	f := newFakeProcs(t)
	c := newTestClient(t, f.handler())
	if _, err := c.SandboxHandle("box").Process("ghost").Logs(t.Context()); !errdefs.IsCode(err, errdefs.CodeProcessNotFound) {
		t.Errorf("Logs(ghost) = %v; want PROCESS_NOT_FOUND", err)
	}
}

func TestWaitForLog(t *testing.T) {
	f := newFakeProcs(t)
	c := newTestClient(t, f.handler())
	p := c.SandboxHandle("box").Process("web")
	ctx := t.Context()

	m, err := p.WaitForLog(ctx, `on :(?P<port>\d+)`, 1500*time.Millisecond)
	body, _ := f.last()
	if err != nil || m.Line != "listening on :3000" || len(m.Match) != 2 || m.Match[1] != "3000" ||
		m.Groups["port"] != "3000" || m.Stream != "stdout" {
		t.Errorf("WaitForLog = %+v, %v", m, err)
	}
	if body["pattern"] != `on :(?P<port>\d+)` || body["timeoutMs"] != float64(1500) || body["text"] != nil {
		t.Errorf("wait-log body = %v", body)
	}
	if _, err := p.WaitForLog(ctx, "x", 0); err != nil {
		t.Fatal(err)
	}
	if body, _ = f.last(); body["timeoutMs"] != nil {
		t.Errorf("timeout 0 sent %v; want no timeoutMs", body)
	}
	if _, err := p.WaitForLogText(ctx, "a.b(", time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if body, _ = f.last(); body["text"] != "a.b(" || body["pattern"] != nil || body["timeoutMs"] != float64(1) {
		t.Errorf("wait-log text body = %v", body)
	}

	// Errors: a bad pattern fails before any call; the server's codes arrive with context.
	f.mu.Lock()
	calls := len(f.bodies)
	f.mu.Unlock()
	if _, err := p.WaitForLog(ctx, "a(", 0); !errdefs.IsCode(err, errdefs.CodeInvalidPattern) || !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("WaitForLog(a() = %v; want INVALID_PATTERN", err)
	}
	if _, err := p.WaitForLogText(ctx, "", 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("WaitForLogText(\"\") = %v; want ErrInvalidArgument", err)
	}
	f.mu.Lock()
	if len(f.bodies) != calls {
		t.Errorf("invalid waits reached the server")
	}
	f.mu.Unlock()
	_, err = p.WaitForLog(ctx, "never", 200*time.Millisecond)
	var e *errdefs.Error
	if !errors.As(err, &e) || e.Code != errdefs.CodeProcessReadyTimeout || !errors.Is(err, errdefs.ErrDeadlineExceeded) ||
		e.Context["timeoutMs"] != float64(200) {
		t.Errorf("WaitForLog(never) = %v (%+v); want PROCESS_READY_TIMEOUT with timeoutMs", err, e)
	}
	_, err = p.WaitForLogText(ctx, "gone", 0)
	if !errors.As(err, &e) || e.Code != errdefs.CodeProcessExitedEarly || e.Context["exitCode"] != float64(1) ||
		e.Context["status"] != "failed" {
		t.Errorf("WaitForLogText(gone) = %v; want PROCESS_EXITED_BEFORE_READY with context", err)
	}
	if _, err := c.SandboxHandle("box").Process("ghost").WaitForLog(ctx, "x", 0); !errdefs.IsCode(err, errdefs.CodeProcessNotFound) {
		t.Errorf("WaitForLog on ghost = %v", err)
	}
}

func TestWaitForPort(t *testing.T) {
	f := newFakeProcs(t)
	c := newTestClient(t, f.handler())
	p := c.SandboxHandle("box").Process("web")
	tests := []struct {
		name string
		opts PortWaitOptions
		want map[string]any // the body besides port
	}{
		{"defaults", PortWaitOptions{}, map[string]any{}},
		{"all", PortWaitOptions{Mode: PortModeHTTP, Path: "/health", StatusMin: 200, StatusMax: 204,
			Interval: 250 * time.Millisecond, Timeout: 30 * time.Second},
			map[string]any{"mode": "http", "path": "/health", "status": map[string]any{"min": 200.0, "max": 204.0},
				"intervalMs": 250.0, "timeoutMs": 30000.0}},
		{"tcp, sub-millisecond", PortWaitOptions{Mode: PortModeTCP, Interval: time.Microsecond, Timeout: 1500 * time.Microsecond},
			map[string]any{"mode": "tcp", "intervalMs": 1.0, "timeoutMs": 2.0}},
		{"only min", PortWaitOptions{StatusMin: 100}, map[string]any{"status": map[string]any{"min": 100.0, "max": 399.0}}},
		{"only high min", PortWaitOptions{StatusMin: 404}, map[string]any{"status": map[string]any{"min": 404.0, "max": 404.0}}},
		{"only max", PortWaitOptions{StatusMax: 299}, map[string]any{"status": map[string]any{"min": 200.0, "max": 299.0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready, err := p.WaitForPort(t.Context(), 3000, tt.opts)
			if err != nil || ready != (PortReady{Port: 3000, StatusCode: 204}) {
				t.Errorf("WaitForPort = %+v, %v", ready, err)
			}
			body, _ := f.last()
			if body["port"] != 3000.0 {
				t.Errorf("port = %v", body["port"])
			}
			delete(body, "port")
			if len(body) != len(tt.want) {
				t.Errorf("body = %v; want %v", body, tt.want)
			}
			for k, v := range tt.want {
				if got, ok := body[k]; !ok || !equalJSON(got, v) {
					t.Errorf("body[%s] = %v; want %v", k, got, v)
				}
			}
		})
	}
}

// equalJSON compares two decoded JSON values.
func equalJSON(a, b any) bool {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		if len(am) != len(bm) {
			return false
		}
		for k := range am {
			if !equalJSON(am[k], bm[k]) {
				return false
			}
		}
		return true
	}
	return a == b
}

func TestWaitForExit(t *testing.T) {
	f := newFakeProcs(t)
	c := newTestClient(t, f.handler())
	p := c.SandboxHandle("box").Process("web")
	ex, err := p.WaitForExit(t.Context(), 90*time.Second)
	if err != nil || ex != (ExitInfo{ProcessID: "web", ExitCode: 3, Status: ProcessFailed}) {
		t.Errorf("WaitForExit = %+v, %v", ex, err)
	}
	if body, _ := f.last(); body["timeoutMs"] != float64(90000) {
		t.Errorf("wait-exit body = %v", body)
	}
	if info := p.Info(); info.Status != ProcessFailed || info.ExitCode == nil || *info.ExitCode != 3 {
		t.Errorf("Info after WaitForExit = %+v", info)
	}
	if _, err := p.WaitForExit(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if body, _ := f.last(); len(body) != 0 {
		t.Errorf("wait-exit without timeout body = %v", body)
	}
}

// TestDotProcessIDsNeverSent checks that "." and ".." are refused before any request: a router
// would clean them out of the path, and the call (a DELETE, say) would address the sandbox.
func TestDotProcessIDsNeverSent(t *testing.T) {
	var calls atomic.Int64
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	for _, id := range []string{".", ".."} {
		if _, err := c.SandboxHandle("box").Process(id).Kill(t.Context(), -1); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
			t.Errorf("Kill(%q) = %v; want VALIDATION_FAILED", id, err)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d requests sent for dot IDs; want 0", n)
	}
}

// TestRedirectsNotFollowed checks that the default client returns a redirect as it is instead of
// re-sending an authenticated DELETE to wherever it points.
func TestRedirectsNotFollowed(t *testing.T) {
	var deletes atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("DELETE /v1/sandboxes/box/process/web", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/v1/sandboxes/box", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("DELETE /v1/sandboxes/box", func(w http.ResponseWriter, r *http.Request) {
		deletes.Add(1)
	})
	c := newTestClient(t, mux)
	if _, err := c.SandboxHandle("box").Process("web").Kill(t.Context(), -1); err == nil {
		t.Error("Kill answered by a redirect succeeded; want an error")
	}
	if n := deletes.Load(); n != 0 {
		t.Fatalf("the redirect was followed: %d DELETEs of the sandbox", n)
	}
}
