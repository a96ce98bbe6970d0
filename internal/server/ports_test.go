package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/preview"
	"github.com/hutchdev/hutch/internal/store"
)

const testToken = "test-api-token"

// portsServer is a real Server whose ports API runs over a real preview.Service and SQLite
// store holding sandbox sb1.
func portsServer(t *testing.T, ports bool) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Insert(ctx, store.Sandbox{ID: "sb1", Status: "stopped"}); err != nil {
		t.Fatal(err)
	}
	var p Ports
	if ports {
		p = preview.NewService(preview.Config{Domain: "localhost", PublicPort: 7412}, st, nil)
	}
	srv := httptest.NewServer(New(slog.New(slog.DiscardHandler), Deps{Token: testToken, Ports: p, Version: "test"}))
	t.Cleanup(srv.Close)
	return srv
}

// call sends method path with body and decodes the JSON reply.
func call(t *testing.T, srv *httptest.Server, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: reply %q: %v", method, path, b, err)
	}
	return resp.StatusCode, m
}

func TestPortsAPI(t *testing.T) {
	srv := portsServer(t, true)

	st, m := call(t, srv, "POST", "/v1/sandboxes/sb1/ports", `{"port": 8080, "name": "web"}`)
	if st != 200 || m["success"] != true || m["port"] != float64(8080) || m["name"] != "web" {
		t.Fatalf("expose: %d %v", st, m)
	}
	tok, _ := m["token"].(string)
	if len(tok) != 16 || m["url"] != "http://8080-sb1-"+tok+".localhost:7412/" {
		t.Fatalf("expose token/url: %v", m)
	}
	if ts, _ := m["timestamp"].(string); !strings.HasSuffix(ts, "Z") {
		t.Fatalf("timestamp %q not UTC RFC 3339", ts)
	} else if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
		t.Fatalf("timestamp %q: %v", ts, err)
	}

	// Re-expose without a token, or with the same one: idempotent, the stored token.
	for _, body := range []string{`{"port": 8080}`, `{"port": 8080, "token": "` + tok + `"}`} {
		st, m = call(t, srv, "POST", "/v1/sandboxes/sb1/ports", body)
		if st != 200 || m["token"] != tok {
			t.Fatalf("re-expose %s: %d %v; want token %s", body, st, m, tok)
		}
	}
	if st, m = call(t, srv, "POST", "/v1/sandboxes/sb1/ports", `{"port": 3000, "token": "mine_1234"}`); st != 200 || m["token"] != "mine_1234" {
		t.Fatalf("custom token: %d %v", st, m)
	}

	st, m = call(t, srv, "GET", "/v1/sandboxes/sb1/ports", "")
	ports, _ := m["ports"].([]any)
	if st != 200 || m["success"] != true || len(ports) != 2 {
		t.Fatalf("list: %d %v", st, m)
	}
	first, _ := ports[0].(map[string]any)
	if first["port"] != float64(3000) || first["token"] != "mine_1234" || first["url"] != "http://3000-sb1-mine_1234.localhost:7412/" || first["exposedAt"] == nil {
		t.Fatalf("list entry %v", first)
	}

	st, m = call(t, srv, "DELETE", "/v1/sandboxes/sb1/ports/3000", "")
	if st != 200 || m["success"] != true || m["port"] != float64(3000) || m["timestamp"] == nil {
		t.Fatalf("unexpose: %d %v", st, m)
	}
	if _, m = call(t, srv, "GET", "/v1/sandboxes/sb1/ports", ""); len(m["ports"].([]any)) != 1 {
		t.Fatalf("list after unexpose: %v", m)
	}
}

func TestPortsAPIErrors(t *testing.T) {
	srv := portsServer(t, true)
	if st, m := call(t, srv, "POST", "/v1/sandboxes/sb1/ports", `{"port": 8080, "token": "taken_12"}`); st != 200 {
		t.Fatalf("setup: %d %v", st, m)
	}
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     errdefs.Code
	}{
		{"port 80", "POST", "/v1/sandboxes/sb1/ports", `{"port": 80}`, 400, errdefs.CodeInvalidPort},
		{"port 0", "POST", "/v1/sandboxes/sb1/ports", `{"port": 0}`, 400, errdefs.CodeInvalidPort},
		{"no port", "POST", "/v1/sandboxes/sb1/ports", `{}`, 400, errdefs.CodeInvalidPort},
		{"empty body", "POST", "/v1/sandboxes/sb1/ports", ``, 400, errdefs.CodeInvalidPort},
		{"port 70000", "POST", "/v1/sandboxes/sb1/ports", `{"port": 70000}`, 400, errdefs.CodeInvalidPort},
		{"port abc", "POST", "/v1/sandboxes/sb1/ports", `{"port": "abc"}`, 400, errdefs.CodeInvalidJSON},
		{"port 1.5", "POST", "/v1/sandboxes/sb1/ports", `{"port": 8080.5}`, 400, errdefs.CodeInvalidJSON},
		{"not json", "POST", "/v1/sandboxes/sb1/ports", `port=8080`, 400, errdefs.CodeInvalidJSON},
		{"bad token", "POST", "/v1/sandboxes/sb1/ports", `{"port": 8081, "token": "Bad-Token"}`, 400, errdefs.CodeBadPortToken},
		{"long token", "POST", "/v1/sandboxes/sb1/ports", `{"port": 8081, "token": "much_too_long_token_x"}`, 400, errdefs.CodeBadPortToken},
		{"bad name", "POST", "/v1/sandboxes/sb1/ports", `{"port": 8081, "name": "a\u0000b"}`, 400, errdefs.CodeInvalidArgument},
		{"token reuse", "POST", "/v1/sandboxes/sb1/ports", `{"port": 8081, "token": "taken_12"}`, 409, errdefs.CodeTokenInUse},
		{"other token", "POST", "/v1/sandboxes/sb1/ports", `{"port": 8080, "token": "other_12"}`, 409, errdefs.CodePortAlreadyExposed},
		{"unknown sandbox", "POST", "/v1/sandboxes/nope/ports", `{"port": 8081}`, 404, errdefs.CodeSandboxNotFound},
		{"bad sandbox id", "POST", "/v1/sandboxes/Bad_ID/ports", `{"port": 8081}`, 400, errdefs.CodeInvalidSandboxID},
		{"list unknown", "GET", "/v1/sandboxes/nope/ports", ``, 404, errdefs.CodeSandboxNotFound},
		{"unexpose unknown port", "DELETE", "/v1/sandboxes/sb1/ports/9999", ``, 404, errdefs.CodePortNotExposed},
		{"unexpose abc", "DELETE", "/v1/sandboxes/sb1/ports/abc", ``, 400, errdefs.CodeInvalidPort},
		{"unexpose 70000", "DELETE", "/v1/sandboxes/sb1/ports/70000", ``, 400, errdefs.CodeInvalidPort},
		{"unexpose unknown sandbox", "DELETE", "/v1/sandboxes/nope/ports/8080", ``, 404, errdefs.CodePortNotExposed},
		{"PUT ports", "PUT", "/v1/sandboxes/sb1/ports", `{}`, 405, errdefs.CodeMethodNotAllowed},
		{"GET one port", "GET", "/v1/sandboxes/sb1/ports/8080", ``, 405, errdefs.CodeMethodNotAllowed},
	}
	for _, tt := range tests {
		st, m := call(t, srv, tt.method, tt.path, tt.body)
		if st != tt.status || m["code"] != string(tt.code) || m["httpStatus"] != float64(tt.status) {
			t.Errorf("%s: %d %v; want %d %s", tt.name, st, m, tt.status, tt.code)
		}
	}
	// INVALID_PORT carries the port.
	if _, m := call(t, srv, "POST", "/v1/sandboxes/sb1/ports", `{"port": 80}`); m["context"].(map[string]any)["port"] != float64(80) {
		t.Errorf("INVALID_PORT context = %v", m["context"])
	}
	if _, m := call(t, srv, "POST", "/v1/sandboxes/sb1/ports", `{"port": 80}`); m["operation"] != "port.expose" {
		t.Errorf("operation = %v", m["operation"])
	}
}

func TestPortsAPIDisabled(t *testing.T) {
	srv := portsServer(t, false)
	if st, m := call(t, srv, "GET", "/v1/sandboxes/sb1/ports", ""); st != 501 || m["code"] != string(errdefs.CodeNotImplemented) {
		t.Fatalf("without Ports: %d %v", st, m)
	}
}

func TestPortsAPINeedsToken(t *testing.T) {
	srv := portsServer(t, true)
	resp, err := srv.Client().Post(srv.URL+"/v1/sandboxes/sb1/ports", "application/json", strings.NewReader(`{"port": 8080}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
}
