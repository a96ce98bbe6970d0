package console

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const secret = "SECRET-DATABASE-CONTENT"

// buildDir lays out a fake console build: dist/ with the usual files, plus a secret file next
// to dist and a symlink inside dist that points at it.
func buildDir(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	dist := filepath.Join(base, "dist")
	files := map[string]string{
		"index.html":      "<!doctype html><title>Hutch</title>",
		"app.js":          "console.log('hi')",
		"app.css":         "body{}",
		"assets/logo.svg": "<svg/>",
		"data.bin":        "\x00\x01",
		".hidden":         "hidden",
	}
	for name, body := range files {
		p := filepath.Join(dist, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "hutch.db"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../hutch.db", filepath.Join(dist, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "hutch.db"), filepath.Join(dist, "abs-escape.js")); err != nil {
		t.Fatal(err)
	}
	return dist
}

// rawGet sends target verbatim on the wire (no client-side cleaning or re-escaping).
func rawGet(t *testing.T, addr, method, target string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, method+" "+target+" HTTP/1.1\r\nHost: "+addr+"\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// servers returns the handler mounted bare (it sees every path as sent) and under a ServeMux
// as hutchd mounts it.
func servers(t *testing.T, h http.Handler) map[string]string {
	bare := httptest.NewServer(h)
	t.Cleanup(bare.Close)
	mux := http.NewServeMux()
	mux.Handle(Prefix, h)
	mux.Handle("/console", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "api", http.StatusUnauthorized) })
	muxed := httptest.NewServer(mux)
	t.Cleanup(muxed.Close)
	return map[string]string{"bare": bare.Listener.Addr().String(), "mux": muxed.Listener.Addr().String()}
}

func TestServesFilesWithTypesAndHeaders(t *testing.T) {
	h := New(buildDir(t), slog.New(slog.DiscardHandler))
	for name, addr := range servers(t, h) {
		for _, tc := range []struct {
			target, ctype, body string
		}{
			{"/console/", "text/html; charset=utf-8", "<title>Hutch</title>"},
			{"/console/index.html", "text/html; charset=utf-8", "<title>Hutch</title>"},
			{"/console/app.js", "text/javascript; charset=utf-8", "console.log"},
			{"/console/app.css", "text/css; charset=utf-8", "body{}"},
			{"/console/assets/logo.svg", "image/svg+xml", "<svg/>"},
			{"/console/data.bin", "application/octet-stream", "\x00\x01"},
		} {
			resp, body := rawGet(t, addr, "GET", tc.target)
			if resp.StatusCode != http.StatusOK || !strings.Contains(body, tc.body) {
				t.Errorf("%s GET %s = %d %q", name, tc.target, resp.StatusCode, body)
				continue
			}
			if got := resp.Header.Get("Content-Type"); got != tc.ctype {
				t.Errorf("%s GET %s: Content-Type %q, want %q", name, tc.target, got, tc.ctype)
			}
			for k, want := range map[string]string{"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"} {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s GET %s: %s %q, want %q", name, tc.target, k, got, want)
				}
			}
		}
		if resp, body := rawGet(t, addr, "HEAD", "/console/app.js"); resp.StatusCode != http.StatusOK || body != "" || resp.ContentLength != int64(len("console.log('hi')")) {
			t.Errorf("%s HEAD = %d, length %d, body %q", name, resp.StatusCode, resp.ContentLength, body)
		}
		if resp, _ := rawGet(t, addr, "GET", "/console"); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/console/" {
			t.Errorf("%s GET /console = %d Location %q", name, resp.StatusCode, resp.Header.Get("Location"))
		}
		for _, m := range []string{"POST", "PUT", "DELETE"} {
			if resp, _ := rawGet(t, addr, m, "/console/app.js"); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s = %d", name, m, resp.StatusCode)
			}
		}
	}
}

func TestRefusesEscapesListingsAndHiddenFiles(t *testing.T) {
	h := New(buildDir(t), slog.New(slog.DiscardHandler))
	for name, addr := range servers(t, h) {
		for _, target := range []string{
			"/console/../hutch.db",
			"/console/%2e%2e/hutch.db",
			"/console/%2E%2E/hutch.db",
			"/console/..%2fhutch.db",
			"/console/..%2Fhutch.db",
			"/console/%2e%2e%2fhutch.db",
			"/console/assets/../../hutch.db",
			"/console/assets/%2e%2e/%2e%2e/hutch.db",
			"/console/..%5chutch.db",
			"/console/..\\hutch.db",
			"/console//hutch.db",
			"/console/./app.js",
			"/console/escape",
			"/console/abs-escape.js",
			"/console/assets/",
			"/console/assets",
			"/console/.hidden",
			"/console/%2ehidden",
			"/console/app.js%00",
			"/console/missing.js",
			"/console/assets%2flogo.svg",
		} {
			resp, body := rawGet(t, addr, "GET", target)
			if resp.StatusCode == http.StatusOK || strings.Contains(body, secret) || strings.Contains(body, "hidden") && !strings.Contains(body, "<") {
				t.Errorf("%s GET %s = %d %q: want a refusal", name, target, resp.StatusCode, body)
			}
			if name == "bare" && resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusBadRequest {
				t.Errorf("bare GET %s = %d, want 404 (or 400 from net/http)", target, resp.StatusCode)
			}
		}
	}
}

func TestMissingOrUnbuiltDirectory(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct{ name, dir, want string }{
		{"missing", filepath.Join(t.TempDir(), "nope"), "not built"},
		{"no index.html", empty, "not built"},
		{"off", "", "console is off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(New(tc.dir, slog.New(slog.DiscardHandler)))
			defer srv.Close()
			resp, body := rawGet(t, srv.Listener.Addr().String(), "GET", "/console/")
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, tc.want) || !strings.Contains(body, "scripts/build-console.sh") {
				t.Errorf("GET /console/ = %d %q", resp.StatusCode, body)
			}
			if resp.Header.Get("Content-Security-Policy") != CSP {
				t.Errorf("the 503 page lacks the CSP")
			}
		})
	}
}

func TestBuiltAfterStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dist")
	srv := httptest.NewServer(New(dir, slog.New(slog.DiscardHandler)))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	if resp, _ := rawGet(t, addr, "GET", "/console/"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("before the build: %d", resp.StatusCode)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("<p>built</p>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if resp, body := rawGet(t, addr, "GET", "/console/"); resp.StatusCode != http.StatusOK || body != "<p>built</p>" {
		t.Fatalf("after the build: %d %q", resp.StatusCode, body)
	}
}

func TestFileName(t *testing.T) {
	for _, tc := range []struct {
		p, raw, want string
		ok           bool
	}{
		{"/console/", "", "index.html", true},
		{"/console/app.js", "", "app.js", true},
		{"/console/a/b.css", "", "a/b.css", true},
		{"/console/a/../b.css", "", "", false},
		{"/console/a/", "", "", false},
		{"/console/a/b", "/console/a%2Fb", "", false},
		{"/console/.env", "", "", false},
		{"/other/app.js", "", "", false},
		{"/console/a\x00", "", "", false},
	} {
		got, ok := fileName(tc.p, tc.raw)
		if got != tc.want || ok != tc.ok {
			t.Errorf("fileName(%q, %q) = %q, %v; want %q, %v", tc.p, tc.raw, got, ok, tc.want, tc.ok)
		}
	}
}
