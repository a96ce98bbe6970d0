package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/preview"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/secret"
	"github.com/hutchdev/hutch/internal/store"
)

// limitsServer is a Server over a real store and a real sandbox Manager (without a runtime:
// starting a sandbox fails), with secrets, the console and a small upload bound (uploadLimit),
// and the unauthenticated rate limit off.
func limitsServer(t *testing.T) (*Server, *httptest.Server) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Insert(ctx, store.Sandbox{ID: "sb1", Status: "stopped", InstanceType: "lite"}); err != nil {
		t.Fatal(err)
	}
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
	box, err := secret.LoadOrCreateKey(filepath.Join(dir, "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	s := New(slog.New(slog.DiscardHandler), Deps{
		Token: testToken, Manager: mgr, Version: "test",
		Ports:                    preview.NewService(preview.Config{Domain: "localhost", PublicPort: 7412}, st, nil),
		Secrets:                  usedSecrets{Store: secret.NewStore(st, box)},
		Console:                  http.NotFoundHandler(),
		UnauthenticatedRateLimit: &RateLimit{0, 0},
		MaxUpload:                uploadLimit,
	})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

const uploadLimit = 1 << 10

// publicPatterns are the routes served without a token.
var publicPatterns = []string{"GET /v1/health", "GET /favicon.ico", "/console/", "/console"}

// routeRequest turns a registered pattern into a method and a concrete path.
func routeRequest(pattern string) (method, path string) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = http.MethodGet, pattern
	}
	if path == "/" {
		path = "/v1/nowhere"
	}
	return method, strings.NewReplacer("{id}", "sb1", "{pid}", "p1", "{cid}", "c1", "{tid}", "t1", "{sid}", "s1",
		"{bid}", "b1", "{port}", "8080", "{name}", "API_KEY").Replace(path)
}

// TestEveryRegisteredRouteAuthenticated walks every route the server registers (so a route
// added later is covered without editing the test): each but the public ones (health, favicon,
// console files) refuses a request without a token, with a wrong one and with the right one
// plus a suffix with 401 UNAUTHENTICATED, the terminal WebSocket included.
func TestEveryRegisteredRouteAuthenticated(t *testing.T) {
	s, srv := limitsServer(t)
	var public []string
	for _, p := range s.patterns {
		if slices.Contains(publicPatterns, p) {
			public = append(public, p)
			continue
		}
		method, path := routeRequest(p)
		for _, auth := range []string{"", "Bearer wrong", "Bearer " + testToken + "x", "Bearer "} {
			req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(`{"command":"id"}`))
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var env struct{ Code string }
			json.NewDecoder(resp.Body).Decode(&env)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || method != http.MethodHead && env.Code != "UNAUTHENTICATED" {
				t.Errorf("%s (%s %s) with %q: %d %s; want 401 UNAUTHENTICATED", p, method, path, auth, resp.StatusCode, env.Code)
			}
		}
	}
	slices.Sort(public)
	want := slices.Sorted(slices.Values(publicPatterns))
	if !slices.Equal(public, want) {
		t.Errorf("public routes registered: %v; want %v", public, want)
	}
	if len(s.patterns) < 100 {
		t.Errorf("only %d routes registered; the walk missed some", len(s.patterns))
	}
}

// send sends body to method path with the token: with its length announced, or chunked.
func send(t *testing.T, srv *httptest.Server, method, path string, body []byte, chunked bool) (int, string) {
	t.Helper()
	var r io.Reader = bytes.NewReader(body)
	if chunked {
		r = io.MultiReader(r) // no known length: sent chunked
	}
	req, _ := http.NewRequest(method, srv.URL+path, r)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var env struct{ Code string }
	json.NewDecoder(resp.Body).Decode(&env)
	return resp.StatusCode, env.Code
}

// TestBodyLimitEveryRoute: every authenticated route refuses a body one byte over its bound
// (MaxJSONBody; the upload's Deps.MaxUpload) with 413 REQUEST_TOO_LARGE before its handler runs;
// routes that read a JSON body refuse one byte over also when it comes chunked, and accept a
// body of exactly the bound (here not JSON: 400 INVALID_JSON, or whatever the handler answers
// past the size check, never 413). The upload's chunked and at-the-bound cases need a running
// sandbox: TestTokenHashMode (e2e) covers them.
func TestBodyLimitEveryRoute(t *testing.T) {
	s, srv := limitsServer(t)
	over := bytes.Repeat([]byte("a"), MaxJSONBody+1)
	checked := 0
	for _, p := range s.patterns {
		method, path := routeRequest(p)
		if slices.Contains(publicPatterns, p) || method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions {
			continue
		}
		body := over
		if p == uploadPattern {
			body = over[:uploadLimit+1]
		}
		if st, code := send(t, srv, method, path, body, false); st != http.StatusRequestEntityTooLarge || code != "REQUEST_TOO_LARGE" {
			t.Errorf("%s with %d bytes: %d %s; want 413 REQUEST_TOO_LARGE", p, len(body), st, code)
		}
		checked++
	}
	if checked < 40 {
		t.Errorf("only %d routes with a body checked", checked)
	}
	// Chunked, and at the bound, on routes whose handler reads the body first.
	for _, p := range []string{
		"POST /v1/sandboxes", "PATCH /v1/sandboxes/{id}", "POST /v1/sandboxes/{id}/ports", "POST /v1/images/build",
		"PUT /v1/secrets/{name}", "POST /v1/sandboxes/{id}/execute", "POST /v1/sandboxes/{id}/write",
		"POST /v1/sandboxes/{id}/process/start", "POST /v1/sandboxes/{id}/watch", "POST /v1/sandboxes/{id}/contexts",
		"POST /v1/sandboxes/{id}/run-code",
	} {
		if !slices.Contains(s.patterns, p) {
			t.Fatalf("route %s is not registered", p)
		}
		method, path := routeRequest(p)
		if st, code := send(t, srv, method, path, over, true); st != http.StatusRequestEntityTooLarge || code != "REQUEST_TOO_LARGE" {
			t.Errorf("%s chunked with %d bytes: %d %s; want 413 REQUEST_TOO_LARGE", p, len(over), st, code)
		}
		if st, code := send(t, srv, method, path, over[:MaxJSONBody], false); st == http.StatusRequestEntityTooLarge {
			t.Errorf("%s with exactly %d bytes: %d %s; want past the size check", p, MaxJSONBody, st, code)
		}
	}
}
