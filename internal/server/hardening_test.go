package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/preview"
	"github.com/hutchdev/hutch/internal/store"
)

// hardenedServer is portsServer with the *Server at hand, for options set before serving.
func hardenedServer(t *testing.T, configure func(*Server)) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Insert(ctx, store.Sandbox{ID: "sb1", Status: store.StatusStopped}); err != nil {
		t.Fatal(err)
	}
	s := New(slog.New(slog.DiscardHandler), testToken, nil, nil, preview.NewService(preview.Config{Domain: "localhost", PublicPort: 7412}, st, nil), "test")
	configure(s)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

// TestEveryRouteAuthenticated sends every sandbox route (terminals, watch, processes, files,
// code, lifecycle, …) without a token, with a wrong one, with a prefix of the right one and with
// the right one plus a suffix: each is 401 UNAUTHENTICATED before any handler runs.
func TestEveryRouteAuthenticated(t *testing.T) {
	srv := portsServer(t, true)
	type rt struct{ method, path string }
	routes := []rt{
		{"POST", "/v1/sandboxes"}, {"GET", "/v1/sandboxes"}, {"GET", "/v1/sandboxes/sb1"}, {"DELETE", "/v1/sandboxes/sb1"},
		{"PATCH", "/v1/sandboxes/sb1"}, {"POST", "/v1/sandboxes/sb1/start"}, {"POST", "/v1/sandboxes/sb1/stop"},
		{"POST", "/v1/sandboxes/sb1/sleep"}, {"POST", "/v1/sandboxes/sb1/wake"},
		{"POST", "/v1/sandboxes/sb1/ports"}, {"GET", "/v1/sandboxes/sb1/ports"}, {"DELETE", "/v1/sandboxes/sb1/ports/8080"},
		{"POST", "/v1/sandboxes/sb1/backups"}, {"POST", "/v1/sandboxes/sb1/backups/b1/restore"}, {"GET", "/v1/backups"},
		{"GET", "/v1/backups/b1"}, {"DELETE", "/v1/backups/b1"},
		{"POST", "/v1/sandboxes/sb1/snapshots"}, {"POST", "/v1/sandboxes/sb1/fork"}, {"POST", "/v1/sandboxes/sb1/restore-snapshot"},
		{"GET", "/v1/snapshots"}, {"GET", "/v1/snapshots/s1"}, {"DELETE", "/v1/snapshots/s1"},
		{"GET", "/v1/sandboxes/sb1/terminals"}, {"GET", "/v1/sandboxes/sb1/terminals/t1"}, {"DELETE", "/v1/sandboxes/sb1/terminals/t1"},
		{"GET", "/v1/images"}, {"POST", "/v1/images/build"}, {"GET", "/v1/nowhere"},
	}
	for _, f := range forwarded {
		p := strings.NewReplacer("{pid}", "p1", "{cid}", "c1").Replace(f.rest)
		routes = append(routes, rt{f.method, "/v1/sandboxes/sb1/" + p})
	}
	for _, r := range routes {
		for _, auth := range []string{"", "Bearer wrong", "Bearer " + testToken[:len(testToken)-1], "Bearer " + testToken + "x", "bearer " + testToken, testToken} {
			req, _ := http.NewRequest(r.method, srv.URL+r.path, strings.NewReader(`{"command":"id"}`))
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
			if resp.StatusCode != http.StatusUnauthorized || env.Code != "UNAUTHENTICATED" {
				t.Errorf("%s %s with %q: %d %s; want 401 UNAUTHENTICATED", r.method, r.path, auth, resp.StatusCode, env.Code)
			}
		}
	}
}

// TestRateLimit: past the burst a client gets 429 RATE_LIMITED with Retry-After, health
// checks stay exempt, tokens come back at the rate, and a stream opened before keeps flowing.
func TestRateLimit(t *testing.T) {
	release := make(chan struct{})
	var streamed sync.WaitGroup
	streamed.Add(1)
	srv := hardenedServer(t, func(s *Server) {
		s.SetRateLimit(5, 10)
		// A stream standing in for SSE and terminals (the console route needs no manager).
		s.SetConsole(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(w, "first")
			w.(http.Flusher).Flush()
			<-release
			fmt.Fprintln(w, "second")
		}))
	})
	resp, err := srv.Client().Get(srv.URL + "/console/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); line != "first\n" {
		t.Fatalf("stream: %q", line)
	}
	limited := 0
	var last *http.Response
	for range 30 {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/sandboxes/sb1/ports", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		r, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if r.StatusCode == http.StatusTooManyRequests {
			limited++
			last = r
		}
	}
	if limited < 15 || last == nil {
		t.Fatalf("%d of 30 requests limited; want at least 15 (burst 10, 5/s)", limited)
	}
	if ra := last.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After = %q; want 1", ra)
	}
	// The envelope has the stable code.
	req, _ := http.NewRequest("GET", srv.URL+"/v1/sandboxes/sb1/ports", nil)
	r, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var env struct{ Code string }
	json.NewDecoder(r.Body).Decode(&env)
	r.Body.Close()
	if r.StatusCode != http.StatusTooManyRequests || env.Code != "RATE_LIMITED" {
		t.Errorf("limited request: %d %s; want 429 RATE_LIMITED", r.StatusCode, env.Code)
	}
	if r, err := srv.Client().Get(srv.URL + "/v1/health"); err != nil || r.StatusCode != http.StatusOK {
		t.Errorf("health while limited: %v %v", r.StatusCode, err)
	} else {
		r.Body.Close()
	}
	// The open stream was not cut or throttled.
	close(release)
	if line, _ := br.ReadString('\n'); line != "second\n" {
		t.Fatalf("stream after the limit: %q", line)
	}
	// Tokens come back (5 per second).
	time.Sleep(1200 * time.Millisecond)
	if st, _ := call(t, srv, "GET", "/v1/sandboxes/sb1/ports", ""); st != http.StatusOK {
		t.Errorf("after a pause: %d", st)
	}
}

func TestRateLimiterBuckets(t *testing.T) {
	l := newRateLimiter(2, 3)
	now := time.Unix(1000, 0)
	for i := range 3 {
		if ok, _ := l.take("a", now); !ok {
			t.Fatalf("take %d refused within the burst", i)
		}
	}
	ok, wait := l.take("a", now)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("over the burst: %v %v; want refused, 500ms", ok, wait)
	}
	if ok, _ := l.take("b", now); !ok {
		t.Fatal("another client is limited by a's bucket")
	}
	if ok, _ := l.take("a", now.Add(500*time.Millisecond)); !ok {
		t.Fatal("no token after 1/rate")
	}
	// Idle buckets are forgotten.
	l.take("c", now.Add(time.Hour))
	if len(l.buckets) != 1 {
		t.Fatalf("%d buckets after an hour; want 1", len(l.buckets))
	}
}

// TestAuditLog: lifecycle decisions and refused authentications are recorded as JSON lines,
// without bodies or tokens; reads are not recorded.
func TestAuditLog(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	srv := hardenedServer(t, func(s *Server) {
		s.SetAuditLog(slog.New(slog.NewJSONHandler(lockedWriter{&mu, &buf}, nil)))
	})
	call(t, srv, "POST", "/v1/sandboxes/sb1/ports", `{"port": 8080, "token": "secret_tok1"}`)
	call(t, srv, "GET", "/v1/sandboxes/sb1/ports", "")
	call(t, srv, "DELETE", "/v1/sandboxes/sb1/ports/8080", "")
	req, _ := http.NewRequest("POST", srv.URL+"/v1/sandboxes", strings.NewReader(`{"id":"x"}`))
	req.Header.Set("Authorization", "Bearer guessed-token")
	if r, err := srv.Client().Do(req); err == nil {
		r.Body.Close()
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		recs = append(recs, m)
	}
	if len(recs) != 3 {
		t.Fatalf("%d audit records; want 3 (expose, unexpose, refused auth):\n%s", len(recs), out)
	}
	for i, want := range []struct {
		action string
		status float64
	}{{"port.expose", 200}, {"port.unexpose", 200}, {"auth.refused", 401}} {
		if recs[i]["action"] != want.action || recs[i]["status"] != want.status || recs[i]["client"] != "127.0.0.1" {
			t.Errorf("record %d = %v; want %s %v", i, recs[i], want.action, want.status)
		}
	}
	if recs[0]["id"] != "sb1" || recs[1]["port"] != "8080" {
		t.Errorf("ids missing: %v / %v", recs[0], recs[1])
	}
	for _, secret := range []string{"secret_tok1", testToken, "guessed-token"} {
		if strings.Contains(out, secret) {
			t.Errorf("audit log holds %q:\n%s", secret, out)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestJSONBodyLimit: every JSON endpoint that reads its body refuses one over MaxJSONBody with
// 413 REQUEST_TOO_LARGE (the streamed PUT …/files is the one endpoint without the limit; the
// agent bounds it).
func TestJSONBodyLimit(t *testing.T) {
	srv := hardenedServer(t, func(*Server) {})
	big := `{"x":"` + strings.Repeat("a", MaxJSONBody) + `"}`
	for _, r := range []struct{ method, path string }{
		{"POST", "/v1/sandboxes"},
		{"PATCH", "/v1/sandboxes/sb1"},
		{"POST", "/v1/sandboxes/sb1/ports"},
		{"POST", "/v1/images/build"},
		{"POST", "/v1/sandboxes/sb1/execute"},
		{"POST", "/v1/sandboxes/sb1/write"},
		{"POST", "/v1/sandboxes/sb1/process/start"},
		{"POST", "/v1/sandboxes/sb1/watch"},
		{"POST", "/v1/sandboxes/sb1/contexts"},
	} {
		st, m := call(t, srv, r.method, r.path, big)
		if st != http.StatusRequestEntityTooLarge || m["code"] != "REQUEST_TOO_LARGE" {
			t.Errorf("%s %s with %d bytes: %d %v; want 413 REQUEST_TOO_LARGE", r.method, r.path, len(big), st, m["code"])
		}
	}
}
