package server

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/store"
)

// sleepServer is a real Server over a real sandbox.Manager and SQLite store holding the
// sandbox sb1, sleeping. Nothing here starts a container: settings changes and sleeping a
// sandbox that is not running touch only the store.
func sleepServer(t *testing.T) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Insert(ctx, store.Sandbox{ID: "sb1", Status: "sleeping", InstanceType: "lite"}); err != nil {
		t.Fatal(err)
	}
	return storeServer(t, dir, st)
}

// storeServer is a real Server over a real sandbox.Manager on store st, its state under dir,
// with an agent binary that is never run.
func storeServer(t *testing.T, dir string, st *store.Store) *httptest.Server {
	t.Helper()
	agent := filepath.Join(dir, "agent-binary")
	if err := os.WriteFile(agent, []byte("not run here"), 0o755); err != nil {
		t.Fatal(err)
	}
	mgr, err := sandbox.New(sandbox.Config{StateDir: filepath.Join(dir, "state"), AgentBinary: agent},
		slog.New(slog.DiscardHandler), sandbox.Deps{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	srv := httptest.NewServer(New(slog.New(slog.DiscardHandler), Deps{Token: testToken, Manager: mgr, Version: "test"}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSleepSettingsAPI(t *testing.T) {
	srv := sleepServer(t)
	st, m := call(t, srv, "GET", "/v1/sandboxes/sb1", "")
	if st != 200 || m["sleepAfter"] != "10m" || m["keepAlive"] != false || m["status"] != "sleeping" {
		t.Fatalf("get: %d %v; want sleepAfter 10m, keepAlive false, sleeping", st, m)
	}
	tests := []struct {
		body       string
		status     int
		sleepAfter string
		keepAlive  bool
		code       string
	}{
		{`{"sleepAfter": "30s"}`, 200, "30s", false, ""},
		{`{"keepAlive": true}`, 200, "30s", true, ""},
		{`{"sleepAfter": 90, "keepAlive": false}`, 200, "1m30s", false, ""},
		{`{"sleepAfter": 1.5}`, 200, "1.5s", false, ""},
		{`{}`, 200, "1.5s", false, ""},
		{`{"sleepAfter": "0"}`, 400, "", false, "VALIDATION_FAILED"},
		{`{"sleepAfter": 0}`, 400, "", false, "VALIDATION_FAILED"},
		{`{"sleepAfter": "never"}`, 400, "", false, "VALIDATION_FAILED"},
		{`{"sleepAfter": "500ms"}`, 400, "", false, "VALIDATION_FAILED"},
		{`{"sleepAfter": true}`, 400, "", false, "VALIDATION_FAILED"},
		{`{"keepAlive": "yes"}`, 400, "", false, "INVALID_JSON"},
		{`{"sleepAfter": `, 400, "", false, "INVALID_JSON"},
	}
	for _, tt := range tests {
		st, m := call(t, srv, "PATCH", "/v1/sandboxes/sb1", tt.body)
		if st != tt.status {
			t.Fatalf("PATCH %s: %d %v; want %d", tt.body, st, m, tt.status)
		}
		if tt.code != "" {
			if m["code"] != tt.code {
				t.Fatalf("PATCH %s: code %v; want %s", tt.body, m["code"], tt.code)
			}
			continue
		}
		if m["sleepAfter"] != tt.sleepAfter || m["keepAlive"] != tt.keepAlive || m["status"] != "sleeping" {
			t.Fatalf("PATCH %s: %v; want sleepAfter %s keepAlive %v, still sleeping", tt.body, m, tt.sleepAfter, tt.keepAlive)
		}
	}
	if st, m := call(t, srv, "PATCH", "/v1/sandboxes/nope", `{"keepAlive": true}`); st != 404 || m["code"] != "SANDBOX_NOT_FOUND" {
		t.Fatalf("PATCH unknown: %d %v", st, m)
	}
	// Sleeping a sleeping sandbox is a no-op that answers its info.
	for range 2 {
		if st, m := call(t, srv, "POST", "/v1/sandboxes/sb1/sleep", ""); st != 200 || m["status"] != "sleeping" {
			t.Fatalf("sleep: %d %v", st, m)
		}
	}
	if st, m := call(t, srv, "POST", "/v1/sandboxes/nope/sleep", ""); st != 404 || m["code"] != "SANDBOX_NOT_FOUND" {
		t.Fatalf("sleep unknown: %d %v", st, m)
	}
	if st, m := call(t, srv, "PUT", "/v1/sandboxes/sb1", "{}"); st != 405 || m["code"] != "METHOD_NOT_ALLOWED" {
		t.Fatalf("PUT: %d %v", st, m)
	}
	if st, m := call(t, srv, "GET", "/v1/sandboxes/sb1/wake", ""); st != 405 {
		t.Fatalf("GET wake: %d %v", st, m)
	}
	// A bad sleepAfter at creation is refused before anything is created.
	if st, m := call(t, srv, "POST", "/v1/sandboxes", `{"id": "sb2", "sleepAfter": "0s"}`); st != 400 || m["code"] != "VALIDATION_FAILED" {
		t.Fatalf("create with sleepAfter 0s: %d %v", st, m)
	}
	if st, _ := call(t, srv, "GET", "/v1/sandboxes/sb2", ""); st != 404 {
		t.Fatalf("sb2 exists after a refused create: %d", st)
	}
}

// TestSleepAfterOutOfRangeNamesValue: a sleepAfter out of range, as a JSON number or a string,
// on create and on PATCH, is VALIDATION_FAILED with a message that names the value sent (a
// negative or huge number of seconds used to be reported as "-1ns").
func TestSleepAfterOutOfRangeNamesValue(t *testing.T) {
	srv := sleepServer(t)
	for _, tc := range []struct{ value, msg string }{
		{`-5`, "sleepAfter -5 (seconds) is outside 1s-8760h"},
		{`1e300`, "sleepAfter 1e300 (seconds) is outside"},
		{`1e400`, "sleepAfter 1e400 (seconds) is outside"},
		{`-0.001`, "sleepAfter -0.001 (seconds)"},
		{`31536001`, "sleepAfter 31536001 (seconds)"},
		{`"-5s"`, "sleepAfter -5s is outside"},
		{`"9000h"`, "sleepAfter 9000h is outside"},
	} {
		for _, req := range []struct{ method, path, body string }{
			{"PATCH", "/v1/sandboxes/sb1", `{"sleepAfter": ` + tc.value + `}`},
			{"POST", "/v1/sandboxes", `{"id": "sb2", "sleepAfter": ` + tc.value + `}`},
		} {
			st, m := call(t, srv, req.method, req.path, req.body)
			msg, _ := m["message"].(string)
			if st != 400 || m["code"] != "VALIDATION_FAILED" || !strings.Contains(msg, tc.msg) || strings.Contains(msg, "-1ns") {
				t.Errorf("%s %s: %d %v; want 400 VALIDATION_FAILED saying %q", req.method, req.body, st, m, tc.msg)
			}
		}
	}
}
