package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/internal/agent/session"
	"github.com/hutchdev/hutch/internal/testutil"
)

// testAgent is a real agent server on a temp unix socket, with an HTTP client dialing it.
type testAgent struct {
	t       *testing.T
	workdir string
	client  *http.Client
}

// startAgent serves a fresh agent for the test and stops it (killing its commands) at cleanup.
func startAgent(t *testing.T) *testAgent {
	t.Helper()
	base := t.TempDir()
	// Unix socket paths are limited to 108 bytes: keep the socket in a short directory.
	sockDir, err := os.MkdirTemp("", "hagent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "a.sock")
	workdir := filepath.Join(base, "workspace")
	srv, err := New(Config{
		Workdir:  workdir,
		StateDir: filepath.Join(base, "state"),
		Env:      append(os.Environ(), "HUTCH_TEST_BASE=1"),
		Version:  "test",
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Serve did not return after cancel")
		}
	})
	return &testAgent{t: t, workdir: workdir, client: &http.Client{Transport: tr}}
}

// obj is a decoded JSON object.
type obj = map[string]any

// do sends a request with a JSON body (nil = none) and decodes the JSON reply.
func (a *testAgent) do(method, path string, body any) (int, obj) {
	a.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			a.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://agent"+path, r)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out obj
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		a.t.Fatalf("%s %s: decode reply: %v", method, path, err)
	}
	return resp.StatusCode, out
}

// post is do with POST.
func (a *testAgent) post(path string, body any) (int, obj) {
	a.t.Helper()
	return a.do(http.MethodPost, path, body)
}

// mustPost posts and fails the test unless the reply is 200 with success true.
func (a *testAgent) mustPost(path string, body any) obj {
	a.t.Helper()
	status, out := a.post(path, body)
	if status != http.StatusOK || out["success"] != true {
		a.t.Fatalf("POST %s %v = %d %v; want 200 success", path, body, status, out)
	}
	return out
}

// exec runs a command with the buffered endpoint and fails unless it succeeds.
func (a *testAgent) exec(body obj) obj {
	a.t.Helper()
	return a.mustPost("/api/execute", body)
}

// wantError checks an error reply's status and code.
func wantError(t *testing.T, status int, out obj, wantStatus int, wantCode string) {
	t.Helper()
	if status != wantStatus || out["code"] != wantCode {
		t.Fatalf("reply = %d %v; want %d %s", status, out, wantStatus, wantCode)
	}
	if int(out["httpStatus"].(float64)) != wantStatus {
		t.Fatalf("httpStatus = %v; want %d", out["httpStatus"], wantStatus)
	}
}

// event is one decoded SSE event.
type event = map[string]any

// openStream posts to an SSE endpoint and returns the response (status checked by caller).
func (a *testAgent) openStream(ctx context.Context, path string, body any) *http.Response {
	a.t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent"+path, bytes.NewReader(b))
	if err != nil {
		a.t.Fatal(err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

// stream posts to an SSE endpoint and reads every event until the stream ends.
func (a *testAgent) stream(path string, body any) []event {
	a.t.Helper()
	resp := a.openStream(context.Background(), path, body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		a.t.Fatalf("POST %s = %d %s", path, resp.StatusCode, b)
	}
	return readEvents(a.t, sse.NewReader(resp.Body))
}

func readEvents(t *testing.T, r *sse.Reader) []event {
	t.Helper()
	var evs []event
	for {
		data, err := r.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatalf("read stream: %v", err)
		}
		var ev event
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		evs = append(evs, ev)
	}
}

// outputOf reassembles the bytes of the stdout or stderr events of an exec stream.
func outputOf(t *testing.T, evs []event, typ string) []byte {
	t.Helper()
	var out []byte
	for _, ev := range evs {
		if ev["type"] != typ {
			continue
		}
		data := ev["data"].(string)
		if ev["encoding"] == "base64" {
			b, err := base64.StdEncoding.DecodeString(data)
			if err != nil {
				t.Fatalf("bad base64 chunk: %v", err)
			}
			out = append(out, b...)
		} else {
			out = append(out, data...)
		}
	}
	return out
}

// randomMark returns a fresh value for a test marker environment variable.
func randomMark() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// waitNoMarked waits until no live process carries TESTMARK=mark, failing after 10 s.
func waitNoMarked(t *testing.T, mark string) {
	t.Helper()
	var pids []int
	if !testutil.Poll(t, 20*time.Millisecond, 10*time.Second, func() bool {
		pids = session.FindMarked("TESTMARK", mark)
		return len(pids) == 0
	}) {
		t.Fatalf("processes still alive with TESTMARK=%s: %v", mark, pids)
	}
}
