package agent

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// newRouteServer is an agent server for routing tests, served through ServeHTTP directly.
func newRouteServer(t *testing.T) *Server {
	t.Helper()
	base := t.TempDir()
	srv, err := New(Config{Workdir: filepath.Join(base, "workspace"), StateDir: filepath.Join(base, "state"),
		Env: os.Environ(), Version: "test", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// serve sends one request through srv and decodes the envelope of the reply (zero if none).
func serve(t *testing.T, srv *Server, method, target, body string) (*httptest.ResponseRecorder, errdefs.Envelope) {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	var env errdefs.Envelope
	_ = json.Unmarshal(rec.Body.Bytes(), &env)
	return rec, env
}

// TestRoutingRefusals pins the agent's answers to unknown paths and refused methods: 404
// NOT_FOUND naming no operation, 405 METHOD_NOT_ALLOWED naming the path's operation (none on the
// process and code context paths), and the exact messages.
func TestRoutingRefusals(t *testing.T) {
	srv := newRouteServer(t)
	for _, tc := range []struct {
		method, target string
		status         int
		code           errdefs.Code
		op             string
		message        string
		allow          string // checked when set
	}{
		{"GET", "/", 404, errdefs.CodeNotFound, "", "unknown endpoint GET /", ""},
		{"GET", "/api", 404, errdefs.CodeNotFound, "", "unknown endpoint GET /api", ""},
		{"GET", "/api/nope", 404, errdefs.CodeNotFound, "", "unknown endpoint GET /api/nope", ""},
		{"GET", "/api/ping/", 404, errdefs.CodeNotFound, "", "unknown endpoint GET /api/ping/", ""},
		{"GET", "/api//ping", 404, errdefs.CodeNotFound, "", "unknown endpoint GET /api//ping", ""},
		{"GET", "/v1/sandboxes/x/ping", 404, errdefs.CodeNotFound, "", "unknown endpoint GET /v1/sandboxes/x/ping", ""},
		{"GET", "/api/process/", 404, errdefs.CodeNotFound, "", "unknown endpoint GET /api/process/", ""},
		{"GET", "/api/process/p1/bogus", 404, errdefs.CodeNotFound, "", "unknown endpoint GET /api/process/p1/bogus", ""},
		{"GET", "/api/process/p1/logs/more", 404, errdefs.CodeNotFound, "", "unknown endpoint GET /api/process/p1/logs/more", ""},
		{"GET", "/api/process//logs", 404, errdefs.CodeNotFound, "", "unknown endpoint GET /api/process//logs", ""},
		// An escaped slash splits an ID: hutchd escapes IDs, so this is the path …/a/b/logs.
		{"GET", "/api/process/a%2Fb/logs", 404, errdefs.CodeNotFound, "", "unknown endpoint GET /api/process/a/b/logs", ""},
		{"GET", "/api/contexts/", 404, errdefs.CodeNotFound, "", "unknown endpoint GET /api/contexts/", ""},
		{"GET", "/api/contexts/c1/bogus", 404, errdefs.CodeNotFound, "", "unknown endpoint GET /api/contexts/c1/bogus", ""},
		{"GET", "/api/contextsx", 404, errdefs.CodeNotFound, "", "unknown endpoint GET /api/contextsx", ""},
		{"POST", "/api/nope", 404, errdefs.CodeNotFound, "", "unknown endpoint POST /api/nope", ""},

		{"POST", "/api/ping", 405, errdefs.CodeMethodNotAllowed, "ping", "method POST not allowed on /api/ping", ""},
		{"HEAD", "/api/ping", 405, errdefs.CodeMethodNotAllowed, "ping", "", ""}, // HEAD has no body
		{"GET", "/api/execute", 405, errdefs.CodeMethodNotAllowed, "exec", "method GET not allowed on /api/execute", ""},
		{"GET", "/api/execute/stream", 405, errdefs.CodeMethodNotAllowed, "exec.stream", "method GET not allowed on /api/execute/stream", ""},
		{"DELETE", "/api/files", 405, errdefs.CodeMethodNotAllowed, "file.raw", "method DELETE not allowed on /api/files", ""},
		{"POST", "/api/files", 405, errdefs.CodeMethodNotAllowed, "file.raw", "method POST not allowed on /api/files", ""},
		{"GET", "/api/read/stream", 405, errdefs.CodeMethodNotAllowed, "file.read.stream", "method GET not allowed on /api/read/stream", ""},
		{"GET", "/api/session/save", 405, errdefs.CodeMethodNotAllowed, "", "method GET not allowed on /api/session/save", ""},
		{"POST", "/api/session/list", 405, errdefs.CodeMethodNotAllowed, "session.list", "method POST not allowed on /api/session/list", ""},
		{"GET", "/api/backup/archive", 405, errdefs.CodeMethodNotAllowed, "backup.archive", "method GET not allowed on /api/backup/archive", ""},
		{"PUT", "/api/backup/extract", 405, errdefs.CodeMethodNotAllowed, "backup.extract", "method PUT not allowed on /api/backup/extract", ""},
		{"GET", "/api/watch", 405, errdefs.CodeMethodNotAllowed, "watch", "method GET not allowed on /api/watch", ""},
		{"POST", "/api/terminals", 405, errdefs.CodeMethodNotAllowed, "", "method POST not allowed on /api/terminals", ""},
		{"GET", "/api/run-code", 405, errdefs.CodeMethodNotAllowed, "code.run", "method GET not allowed on /api/run-code", ""},
		{"GET", "/api/process/start", 405, errdefs.CodeMethodNotAllowed, "", "method GET not allowed on /api/process/start", ""},
		{"POST", "/api/process/list", 405, errdefs.CodeMethodNotAllowed, "", "method POST not allowed on /api/process/list", ""},
		{"GET", "/api/process/kill-all", 405, errdefs.CodeMethodNotAllowed, "", "method GET not allowed on /api/process/kill-all", ""},
		{"POST", "/api/process/p1", 405, errdefs.CodeMethodNotAllowed, "", "method POST not allowed on /api/process/p1", ""},
		{"POST", "/api/process/p1/logs", 405, errdefs.CodeMethodNotAllowed, "", "method POST not allowed on /api/process/p1/logs", ""},
		{"GET", "/api/process/p1/wait-exit", 405, errdefs.CodeMethodNotAllowed, "", "method GET not allowed on /api/process/p1/wait-exit", ""},
		{"PUT", "/api/contexts", 405, errdefs.CodeMethodNotAllowed, "", "method PUT not allowed on /api/contexts", ""},
		{"POST", "/api/contexts/c1", 405, errdefs.CodeMethodNotAllowed, "", "method POST not allowed on /api/contexts/c1", ""},
		{"GET", "/api/contexts/c1/run", 405, errdefs.CodeMethodNotAllowed, "", "method GET not allowed on /api/contexts/c1/run", ""},
		{"POST", "/api/terminals/t1", 405, errdefs.CodeMethodNotAllowed, "terminal.connect", "method POST not allowed on /api/terminals/t1", "GET, DELETE"},
	} {
		rec, env := serve(t, srv, tc.method, tc.target, "")
		if rec.Code != tc.status || env.Code != tc.code || env.Operation != tc.op || env.HTTPStatus != tc.status {
			t.Errorf("%s %s: status %d, envelope %+v; want %d %s operation %q", tc.method, tc.target, rec.Code, env, tc.status, tc.code, tc.op)
		}
		if tc.message != "" && env.Message != tc.message {
			t.Errorf("%s %s: message %q, want %q", tc.method, tc.target, env.Message, tc.message)
		}
		if tc.allow != "" && rec.Header().Get("Allow") != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.target, rec.Header().Get("Allow"), tc.allow)
		}
	}
}

// TestRoutingReachesHandlers sends a request to concrete paths of routes whose handlers refuse
// it on their own terms (bad JSON, unknown ID): the code proves the request reached the route's
// handler, and the operation that it names the route.
func TestRoutingReachesHandlers(t *testing.T) {
	srv := newRouteServer(t)
	for _, tc := range []struct {
		method, target, body string
		code                 errdefs.Code
		op                   string
	}{
		{"POST", "/api/execute", "{", errdefs.CodeInvalidJSON, "exec"},
		{"POST", "/api/execute/stream", "{", errdefs.CodeInvalidJSON, "exec.stream"},
		{"POST", "/api/session/create", "{", errdefs.CodeInvalidJSON, "session.create"},
		{"POST", "/api/session/delete", "{", errdefs.CodeInvalidJSON, "session.delete"},
		{"POST", "/api/write", "{", errdefs.CodeInvalidJSON, "file.write"},
		{"GET", "/api/files", "", errdefs.CodeInvalidPath, "file.raw"},
		{"PUT", "/api/files", "", errdefs.CodeInvalidPath, "file.raw"},
		{"POST", "/api/read", "{", errdefs.CodeInvalidJSON, "file.read"},
		{"POST", "/api/read/stream", "{", errdefs.CodeInvalidJSON, "file.read.stream"},
		{"POST", "/api/list-files", "{", errdefs.CodeInvalidJSON, "file.list"},
		{"POST", "/api/mkdir", "{", errdefs.CodeInvalidJSON, "file.mkdir"},
		{"POST", "/api/delete", "{", errdefs.CodeInvalidJSON, "file.delete"},
		{"POST", "/api/rename", "{", errdefs.CodeInvalidJSON, "file.rename"},
		{"POST", "/api/move", "{", errdefs.CodeInvalidJSON, "file.move"},
		{"POST", "/api/exists", "{", errdefs.CodeInvalidJSON, "file.exists"},
		{"POST", "/api/git/checkout", "{", errdefs.CodeInvalidJSON, "git.checkout"},
		{"POST", "/api/backup/archive", "{", errdefs.CodeInvalidJSON, "backup.archive"},
		{"POST", "/api/backup/extract", "", errdefs.CodeInvalidPath, "backup.extract"},
		{"POST", "/api/watch", "{", errdefs.CodeInvalidJSON, "watch"},
		{"POST", "/api/watch/check", "{", errdefs.CodeInvalidJSON, "watch.check"},
		{"POST", "/api/run-code", "{", errdefs.CodeInvalidJSON, "code.run"},
		{"POST", "/api/process/start", "{", errdefs.CodeInvalidJSON, "process.start"},
		{"GET", "/api/process/list?status=bogus", "", errdefs.CodeInvalidArgument, "process.list"},
		{"DELETE", "/api/process/kill-all?graceMs=-1", "", errdefs.CodeInvalidArgument, "process.killAll"},
		{"GET", "/api/process/p1", "", errdefs.CodeProcessNotFound, "process.get"},
		{"DELETE", "/api/process/p1", "", errdefs.CodeProcessNotFound, "process.kill"},
		{"GET", "/api/process/p1/logs", "", errdefs.CodeProcessNotFound, "process.logs"},
		{"GET", "/api/process/p1/stream", "", errdefs.CodeProcessNotFound, "process.stream"},
		{"POST", "/api/process/p1/wait-log", "{", errdefs.CodeInvalidJSON, "process.waitForLog"},
		{"POST", "/api/process/p1/wait-port", "{", errdefs.CodeInvalidJSON, "process.waitForPort"},
		{"POST", "/api/process/p1/wait-exit", "{", errdefs.CodeInvalidJSON, "process.waitForExit"},
		// Dot segments are IDs like any other, never a step up the path.
		{"GET", "/api/process/..", "", errdefs.CodeProcessNotFound, "process.get"},
		{"GET", "/api/process/%2E%2E/logs", "", errdefs.CodeProcessNotFound, "process.logs"},
		{"POST", "/api/contexts", "{", errdefs.CodeInvalidJSON, "code.contexts.create"},
		{"GET", "/api/contexts/c1", "", errdefs.CodeContextNotFound, "code.contexts.get"},
		{"DELETE", "/api/contexts/c1", "", errdefs.CodeContextNotFound, "code.contexts.delete"},
		{"POST", "/api/contexts/c1/run", "{", errdefs.CodeInvalidJSON, "code.run"},
		{"POST", "/api/contexts/c1/interrupt", "", errdefs.CodeContextNotFound, "code.interrupt"},
		{"GET", "/api/terminals/t1", "", errdefs.CodeInvalidArgument, "terminal.connect"},
		{"GET", "/api/terminals/BAD", "", errdefs.CodeInvalidArgument, "terminal.connect"},
		{"DELETE", "/api/terminals/t1", "", errdefs.CodeTerminalNotFound, "terminal.kill"},
		// A terminal's ID is the rest of its path: one with a slash is invalid, not unknown.
		{"GET", "/api/terminals/", "", errdefs.CodeInvalidArgument, "terminal.connect"},
		{"DELETE", "/api/terminals/a/b", "", errdefs.CodeInvalidArgument, "terminal.kill"},
		{"DELETE", "/api/terminals/a%2Fb", "", errdefs.CodeInvalidArgument, "terminal.kill"},
	} {
		rec, env := serve(t, srv, tc.method, tc.target, tc.body)
		if env.Code != tc.code || env.Operation != tc.op || rec.Code != env.HTTPStatus {
			t.Errorf("%s %s: status %d, envelope %+v; want %s operation %q", tc.method, tc.target, rec.Code, env, tc.code, tc.op)
		}
	}
	// Routes that succeed without a body.
	for _, target := range []string{"/api/ping", "/api/session/list", "/api/process/list", "/api/terminals", "/api/contexts"} {
		if rec, _ := serve(t, srv, "GET", target, ""); rec.Code != http.StatusOK {
			t.Errorf("GET %s: status %d: %s", target, rec.Code, rec.Body)
		}
	}
	if rec, _ := serve(t, srv, "POST", "/api/session/save", ""); rec.Code != http.StatusOK {
		t.Errorf("POST /api/session/save: status %d: %s", rec.Code, rec.Body)
	}
}

// TestRoutingEveryRoute walks agentapi.Routes: each route's method on its path (wildcards
// filled) reaches a handler, which refuses a malformed request on its own terms or answers, and
// names the route's operation; another method on the path is 405 with the path's methods in
// Allow.
func TestRoutingEveryRoute(t *testing.T) {
	srv := newRouteServer(t)
	methods := map[string][]string{}
	for _, rt := range agentapi.Routes {
		methods[rt.Pattern] = append(methods[rt.Pattern], rt.Method)
	}
	for _, rt := range agentapi.Routes {
		target := rt.Pattern
		if w := rt.Wildcard(); w != "" {
			target = strings.Replace(target, "{"+w+"}", "x1", 1)
		}
		body := ""
		if rt.Body == v1.BodyJSON {
			body = "{"
		}
		rec, env := serve(t, srv, rt.Method, target, body)
		switch {
		case env.Code == errdefs.CodeNotFound || env.Code == errdefs.CodeMethodNotAllowed:
			t.Errorf("%s %s: not routed: %d %+v", rt.Method, target, rec.Code, env)
		case env.Code != "" && env.Operation != rt.Operation:
			t.Errorf("%s %s: operation %q, want %q", rt.Method, target, env.Operation, rt.Operation)
		case env.Code == "" && rec.Code != http.StatusOK:
			t.Errorf("%s %s: status %d without an envelope: %s", rt.Method, target, rec.Code, rec.Body)
		}
		if rt.Method == http.MethodGet {
			if rec, _ := serve(t, srv, http.MethodHead, target, ""); rec.Code != http.StatusMethodNotAllowed {
				t.Errorf("HEAD %s: status %d", target, rec.Code)
			}
		}
		rec, env = serve(t, srv, "PATCH", target, "")
		if rec.Code != http.StatusMethodNotAllowed || env.Code != errdefs.CodeMethodNotAllowed {
			t.Errorf("PATCH %s: %d %+v, want 405", target, rec.Code, env)
		}
		if got, want := rec.Header().Get("Allow"), strings.Join(methods[rt.Pattern], ", "); got != want {
			t.Errorf("PATCH %s: Allow %q, want %q", target, got, want)
		}
	}
}

// TestPingStatesProtocol: the ping reply carries the protocol version hutchd checks.
func TestPingStatesProtocol(t *testing.T) {
	rec, _ := serve(t, newRouteServer(t), "GET", "/api/ping", "")
	if rec.Code != http.StatusOK || rec.Header().Get(agentapi.HeaderProtocol) != agentapi.Version {
		t.Fatalf("ping: %d, %s %q", rec.Code, agentapi.HeaderProtocol, rec.Header().Get(agentapi.HeaderProtocol))
	}
}
