package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/console"
)

// The console's static files are served without a token; the API next to them still needs one,
// and a path that climbs out of /console/ is refused before it reaches the file server.
func TestConsoleWithoutAuth(t *testing.T) {
	dir := t.TempDir()
	dist := filepath.Join(dir, "dist")
	if err := os.MkdirAll(dist, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dist, "index.html"), []byte("<title>console</title>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hutch.db"), []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(slog.New(slog.DiscardHandler), Deps{Token: testToken, Version: "test", Console: console.New(dist, slog.New(slog.DiscardHandler))}))
	defer srv.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{
		{"/console/", http.StatusOK, "<title>console</title>"},
		{"/console", http.StatusMovedPermanently, ""},
		{"/console/../hutch.db", http.StatusNotFound, ""},
		{"/console/%2e%2e/hutch.db", http.StatusNotFound, ""},
		{"/v1/sandboxes", http.StatusUnauthorized, ""},
		{"/consolex", http.StatusUnauthorized, ""},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
		req.URL.Opaque = tc.path // sent as is
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.body) || strings.Contains(string(b), "SECRET") {
			t.Errorf("GET %s = %d %q, want %d", tc.path, resp.StatusCode, b, tc.status)
		}
	}
}

// The browser's favicon request gets an empty answer without auth, not a 401 on every page.
func TestFaviconNoAuth(t *testing.T) {
	srv := portsServer(t, true)
	resp, err := srv.Client().Get(srv.URL + "/favicon.ico")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("GET /favicon.ico = %d, want 204", resp.StatusCode)
	}
}
