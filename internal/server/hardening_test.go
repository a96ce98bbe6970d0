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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/internal/auditlog"
	"github.com/hutchdev/hutch/internal/logbound"
	"github.com/hutchdev/hutch/internal/preview"
	"github.com/hutchdev/hutch/internal/secret"
	"github.com/hutchdev/hutch/internal/store"
	"github.com/hutchdev/hutch/internal/testutil"
)

// hardenedServer is portsServer with the *Server at hand, for options set before serving.
func hardenedServer(t *testing.T, configure func(*Deps)) *httptest.Server {
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
	d := Deps{Token: testToken, Ports: preview.NewService(preview.Config{Domain: "localhost", PublicPort: 7412}, st, nil), Version: "test"}
	configure(&d)
	srv := httptest.NewServer(New(slog.New(slog.DiscardHandler), d))
	t.Cleanup(srv.Close)
	return srv
}

// TestEveryRouteAuthenticated sends every sandbox route (terminals, watch, processes, files,
// code, lifecycle, …) without a token, with a wrong one, with a prefix of the right one and with
// the right one plus a suffix: each is 401 UNAUTHENTICATED before any handler runs.
func TestEveryRouteAuthenticated(t *testing.T) {
	srv := hardenedServer(t, func(d *Deps) { d.UnauthenticatedRateLimit = &RateLimit{0, 0} })
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
	for _, f := range v1.Routes {
		if f.Forwarded {
			p := strings.NewReplacer("{id}", "sb1", "{pid}", "p1", "{cid}", "c1").Replace(f.Pattern)
			routes = append(routes, rt{f.Method, p})
		}
	}
	for _, r := range routes {
		for _, auth := range []string{"", "Bearer wrong", "Bearer " + testToken[:len(testToken)-1], "Bearer " + testToken + "x", "Basic " + testToken, "Bearer" + testToken, testToken} {
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
	clock := testutil.NewClock(time.Now())
	srv := hardenedServer(t, func(d *Deps) {
		d.RateLimit = &RateLimit{5, 10}
		d.Now = clock.Now
		// A stream standing in for SSE and terminals (the console route needs no manager).
		d.Console = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(w, "first")
			w.(http.Flusher).Flush()
			<-release
			fmt.Fprintln(w, "second")
		})
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
	if limited != 20 || last == nil {
		t.Fatalf("%d of 30 requests limited; want 20 (burst 10, and the clock stands still)", limited)
	}
	if ra := last.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After = %q; want 1", ra)
	}
	// The envelope has the stable code.
	req, _ := http.NewRequest("GET", srv.URL+"/v1/sandboxes/sb1/ports", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
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
	clock.Advance(1200 * time.Millisecond)
	if st, _ := call(t, srv, "GET", "/v1/sandboxes/sb1/ports", ""); st != http.StatusOK {
		t.Errorf("after a pause: %d", st)
	}
}

// TestAuditLog: lifecycle decisions and refused authentications are recorded as JSON lines,
// without bodies or tokens; reads are not recorded.
func TestAuditLog(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	srv := hardenedServer(t, func(d *Deps) {
		d.AuditLog = slog.New(slog.NewJSONHandler(lockedWriter{&mu, &buf}, nil))
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
	srv := hardenedServer(t, func(*Deps) {})
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

// TestBearerSchemeCase: the Authorization scheme is case-insensitive (RFC 7235), the token is
// not.
func TestBearerSchemeCase(t *testing.T) {
	srv := hardenedServer(t, func(*Deps) {})
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"Bearer " + testToken, http.StatusOK},
		{"bearer " + testToken, http.StatusOK},
		{"BEARER " + testToken, http.StatusOK},
		{"bEaReR  " + testToken, http.StatusOK},
		{"bearer " + strings.ToUpper(testToken), http.StatusUnauthorized},
		{"bearer wrong", http.StatusUnauthorized},
		{"bearer" + testToken, http.StatusUnauthorized},
		{"Basic " + testToken, http.StatusUnauthorized},
		{"bearer", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/sandboxes/sb1/ports", nil)
		req.Header.Set("Authorization", tc.auth)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Authorization %q: %d; want %d", tc.auth, resp.StatusCode, tc.want)
		}
	}
}

// TestUnauthenticatedFlood: requests without a valid token draw from their own, smaller
// bucket: a flood of them from the same address gets 401 then 429, and never makes a request
// with the token get 429.
func TestUnauthenticatedFlood(t *testing.T) {
	srv := hardenedServer(t, func(d *Deps) {
		d.RateLimit = &RateLimit{1000, 200}
		d.UnauthenticatedRateLimit = &RateLimit{20, 100}
	})
	do := func(auth string) (int, string, string) {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/sandboxes/sb1/ports", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Error(err)
			return 0, "", ""
		}
		defer resp.Body.Close()
		var env struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&env)
		return resp.StatusCode, env.Code, resp.Header.Get("Retry-After")
	}
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				auth := "Bearer guess-" + strconv.Itoa(w*1000+i)
				if i%2 == 1 {
					auth = "" // no token at all
				}
				st, code, ra := do(auth)
				key := strconv.Itoa(st) + " " + code
				if st == http.StatusTooManyRequests && ra == "" {
					key += " without Retry-After"
				}
				mu.Lock()
				counts["unauth "+key]++
				mu.Unlock()
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				st, code, _ := do("Bearer " + testToken)
				mu.Lock()
				counts["auth "+strconv.Itoa(st)+" "+code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if counts["auth 200 "] != 160 || len(counts) != 3 {
		t.Errorf("outcomes %v; want 160 authenticated 200s, the rest 401 UNAUTHENTICATED or 429 RATE_LIMITED", counts)
	}
	if counts["unauth 401 UNAUTHENTICATED"] < 100 || counts["unauth 429 RATE_LIMITED"] == 0 {
		t.Errorf("outcomes %v; want the burst of 100 answered 401, then 429s", counts)
	}
	// Still limited for guessers, still open to the token holder.
	if st, code, _ := do("Bearer another-guess"); st != http.StatusTooManyRequests || code != "RATE_LIMITED" {
		t.Errorf("guess after the flood: %d %s; want 429 RATE_LIMITED", st, code)
	}
	if st, _, _ := do("Bearer " + testToken); st != http.StatusOK {
		t.Errorf("token after the flood: %d; want 200", st)
	}
}

// auditRecords parses JSON lines.
func auditRecords(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		recs = append(recs, m)
	}
	return recs
}

// TestAuditFieldsBounded: a refused request with a 900,000-byte path, a long user agent and
// a multi-byte path writes one short record, each string cut to auditlog.FieldMax with a marker.
func TestAuditFieldsBounded(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	srv := hardenedServer(t, func(d *Deps) {
		d.AuditLog = slog.New(slog.NewJSONHandler(lockedWriter{&mu, &buf}, nil))
	})
	long := "/v1/sandboxes/" + strings.Repeat("a", 900_000) + "/ports"
	req, _ := http.NewRequest("GET", srv.URL+long, nil)
	req.Header.Set("User-Agent", strings.Repeat("u", 10_000))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Multi-byte runes straddling the cut.
	req, _ = http.NewRequest("DELETE", srv.URL+"/v1/sandboxes/"+strings.Repeat("é", 300), nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	if resp, err = srv.Client().Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if len(out) > 4096 {
		t.Fatalf("audit log is %d bytes after two requests; want a bounded record each", len(out))
	}
	recs := auditRecords(t, out)
	if len(recs) != 2 {
		t.Fatalf("%d records; want 2:\n%s", len(recs), out)
	}
	for k, full := range map[string]int{"path": len(long), "id": 900_000, "userAgent": 10_000} {
		v, _ := recs[0][k].(string)
		if len(v) > auditlog.FieldMax+32 || !strings.HasSuffix(v, "…["+strconv.Itoa(full)+" bytes]") {
			t.Errorf("record field %s = %q (%d bytes); want at most %d bytes and the marker", k, v, len(v), auditlog.FieldMax)
		}
	}
	id, _ := recs[1]["id"].(string)
	if recs[1]["action"] != "sandbox.destroy" || !utf8.ValidString(id) || !strings.HasPrefix(id, "éé") || !strings.HasSuffix(id, "…[600 bytes]") {
		t.Errorf("multi-byte record = %v", recs[1])
	}
}

// TestAuditCreateOnlyWhenCreated: get-or-create that found the sandbox (200) is not recorded;
// a creation (201) and a failed attempt are.
func TestAuditCreateOnlyWhenCreated(t *testing.T) {
	var buf bytes.Buffer
	s := New(slog.New(slog.DiscardHandler), Deps{Token: testToken, Version: "test", AuditLog: slog.New(slog.NewJSONHandler(&buf, nil))})
	for _, status := range []int{http.StatusOK, http.StatusCreated, http.StatusBadRequest} {
		r := httptest.NewRequest("POST", "/v1/sandboxes", nil)
		r.Pattern = "POST /v1/sandboxes"
		r, note := withAuditNote(r)
		noteAuditID(r, "box")
		s.recordAudit(r, note, status, time.Millisecond)
	}
	recs := auditRecords(t, buf.String())
	if len(recs) != 2 || recs[0]["status"] != 201.0 || recs[1]["status"] != 400.0 {
		t.Fatalf("records %v; want the 201 and the 400 only", recs)
	}
	if recs[0]["action"] != "sandbox.create" || recs[0]["id"] != "box" || recs[0]["ok"] != true {
		t.Errorf("creation record = %v", recs[0])
	}
}

// TestAuditSecretsAndEgress: secret set and delete are recorded with the name only, never
// the value; egress policy put and patch with the sandbox ID; rate-limited requests are not.
func TestAuditSecretsAndEgress(t *testing.T) {
	const value = "sk-live-do-not-log-4f1e2d"
	var buf bytes.Buffer
	var mu sync.Mutex
	srv := hardenedServer(t, func(d *Deps) {
		dir := t.TempDir()
		st, err := store.Open(context.Background(), filepath.Join(dir, "secrets.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		box, err := secret.LoadOrCreateKey(filepath.Join(dir, "master.key"))
		if err != nil {
			t.Fatal(err)
		}
		d.Secrets = usedSecrets{Store: secret.NewStore(st, box)}
		d.AuditLog = slog.New(slog.NewJSONHandler(lockedWriter{&mu, &buf}, nil))
		d.RateLimit = &RateLimit{0.01, 6}
	})
	if st, m := rawCall(t, srv, "PUT", "/v1/secrets/API_KEY", testToken, `{"value":"`+value+`"}`); st != http.StatusNoContent {
		t.Fatalf("put secret: %d %v", st, m)
	}
	rawCall(t, srv, "GET", "/v1/secrets", testToken, "")
	if st, m := rawCall(t, srv, "DELETE", "/v1/secrets/API_KEY", testToken, ""); st != http.StatusNoContent {
		t.Fatalf("delete secret: %d %v", st, m)
	}
	// Egress policies are not enabled here (501): the attempts are still recorded.
	rawCall(t, srv, "PUT", "/v1/sandboxes/sb1/egress", testToken, `{"mode":"deny-all"}`)
	rawCall(t, srv, "PATCH", "/v1/sandboxes/sb1/egress", testToken, `{"mode":"allow-all"}`)
	rawCall(t, srv, "GET", "/v1/sandboxes/sb1/egress", testToken, "")
	// Burst of 6 spent: the next lifecycle calls are 429 and not recorded.
	for range 3 {
		if st, _ := rawCall(t, srv, "PUT", "/v1/secrets/OTHER", testToken, `{"value":"`+value+`"}`); st != http.StatusTooManyRequests {
			t.Fatalf("past the burst: %d; want 429", st)
		}
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if strings.Contains(out, value) {
		t.Fatalf("audit log holds the secret value:\n%s", out)
	}
	recs := auditRecords(t, out)
	want := []struct{ action, key, val string }{
		{"secret.set", "name", "API_KEY"}, {"secret.delete", "name", "API_KEY"},
		{"egress.put", "id", "sb1"}, {"egress.patch", "id", "sb1"},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records; want %d:\n%s", len(recs), len(want), out)
	}
	for i, w := range want {
		if recs[i]["action"] != w.action || recs[i][w.key] != w.val {
			t.Errorf("record %d = %v; want %s with %s=%s", i, recs[i], w.action, w.key, w.val)
		}
	}
}

// TestAuditLogFileBounded: hundreds of refused requests with huge paths, through the server
// into a logbound.RotatingFile, leave at most (1+keep)×max bytes on disk, every line whole JSON.
func TestAuditLogFileBounded(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	const maxBytes, keep = 8 << 10, 2
	f, err := logbound.OpenRotatingFile(path, maxBytes, keep)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	srv := hardenedServer(t, func(d *Deps) {
		d.AuditLog = slog.New(slog.NewJSONHandler(f, nil))
		d.UnauthenticatedRateLimit = &RateLimit{0, 0}
	})
	huge := "/v1/" + strings.Repeat("p", 200_000)
	for range 300 {
		resp, err := srv.Client().Get(srv.URL + huge)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	lines := 0
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > maxBytes {
			t.Errorf("%s is %d bytes; want at most %d", e.Name(), len(b), maxBytes)
		}
		total += int64(len(b))
		for _, r := range auditRecords(t, string(b)) {
			if r["action"] != "auth.refused" {
				t.Errorf("record %v", r)
			}
			lines++
		}
	}
	if len(entries) != 1+keep || total > (1+keep)*maxBytes {
		t.Errorf("%d files, %d bytes; want %d files, at most %d bytes", len(entries), total, 1+keep, (1+keep)*maxBytes)
	}
	if lines == 0 {
		t.Error("no records")
	}
}
