package agentclient

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// startAgent serves a real agent on a unix socket and returns a client of it, with the agent's
// workdir.
func startAgent(t *testing.T) (*Client, string) {
	t.Helper()
	base := t.TempDir()
	sockDir, err := os.MkdirTemp("", "hac")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	workdir := filepath.Join(base, "workspace")
	srv, err := agent.New(agent.Config{Workdir: workdir, StateDir: filepath.Join(base, "state"), Env: os.Environ(),
		Version: "test", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "a.sock")
	ln, err := agent.Listen(sock)
	if err != nil {
		t.Fatal(err)
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
		<-done
	})
	return New("sb1", tr), workdir
}

// fakeAgent is a client of handler h (served over TCP by httptest).
func fakeAgent(t *testing.T, h http.HandlerFunc) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", srv.Listener.Addr().String())
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return New("sb1", tr)
}

func TestPingRealAgent(t *testing.T) {
	c, _ := startAgent(t)
	rep, err := c.Ping(context.Background())
	if err != nil || !rep.Success || rep.Status != "healthy" || rep.Version != "test" {
		t.Fatalf("Ping = %+v, %v", rep, err)
	}
}

// TestPingProtocolVersion: an agent that states another protocol version is refused with
// AGENT_PROTOCOL_MISMATCH naming both versions; one that states none speaks version 1.
func TestPingProtocolVersion(t *testing.T) {
	for _, tc := range []struct {
		header string
		code   errdefs.Code // "" = accepted
		got    string       // the error's "got" (default: header)
	}{
		{agentapi.Version, "", ""},
		{"", "", ""},
		{"2", errdefs.CodeAgentProtocol, ""},
		{"0", errdefs.CodeAgentProtocol, ""},
		// A sandbox-side value is quoted bounded: it becomes the sandbox's lastError.
		{strings.Repeat("9", 600<<10), errdefs.CodeAgentProtocol, strings.Repeat("9", 32) + "…"},
	} {
		if tc.got == "" {
			tc.got = tc.header
		}
		c := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/ping" {
				http.NotFound(w, r)
				return
			}
			if tc.header != "" {
				w.Header().Set(agentapi.HeaderProtocol, tc.header)
			}
			io.WriteString(w, `{"success":true,"status":"healthy","version":"x","timestamp":"2026-01-01T00:00:00Z"}`)
		})
		_, err := c.Ping(context.Background())
		if tc.code == "" {
			if err != nil {
				t.Errorf("version %q: %v", tc.header, err)
			}
			continue
		}
		var e *errdefs.Error
		if !errors.As(err, &e) || e.Code != tc.code || e.Context["got"] != tc.got || len(e.Message) > 300 || e.Context["want"] != agentapi.Version ||
			errdefs.HTTPStatus(err) != http.StatusServiceUnavailable {
			t.Errorf("version %q: %v (%+v); want %s", tc.header, err, e, tc.code)
		}
	}
}

// TestErrors: a refused call is the agent's envelope; a dead agent is AGENT_UNAVAILABLE and a
// dial error; a cancelled caller gets its context's error, unclassified.
func TestErrors(t *testing.T) {
	c, _ := startAgent(t)
	_, err := c.Archive(context.Background(), agentapi.ArchiveRequest{Dir: "relative"})
	if !errdefs.IsCode(err, errdefs.CodeInvalidPath) {
		t.Errorf("Archive(relative) = %v; want INVALID_PATH", err)
	}
	dead := New("sb2", &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(t.TempDir(), "none.sock"))
	}})
	_, err = dead.Ping(context.Background())
	var e *errdefs.Error
	if !errors.As(err, &e) || e.Code != errdefs.CodeAgentUnavailable || e.Context["id"] != "sb2" || !IsDialError(err) {
		t.Errorf("dead Ping = %v; want AGENT_UNAVAILABLE, a dial error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.SaveSessions(ctx); !errors.Is(err, context.Canceled) || errdefs.IsCode(err, errdefs.CodeAgentUnavailable) {
		t.Errorf("cancelled SaveSessions = %v", err)
	}
}

// TestArchiveExtract round-trips a directory through the real agent: the archive is complete
// (its stats trailer), and the extract reply names what was extracted.
func TestArchiveExtract(t *testing.T) {
	c, _ := startAgent(t)
	ctx := context.Background()
	// The agent only archives below its allowed roots (/tmp is one).
	src, err := os.MkdirTemp("/tmp", "hac-src")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(src)
	os.WriteFile(filepath.Join(src, "a.txt"), []byte("hello"), 0o644)
	a, err := c.Archive(ctx, agentapi.ArchiveRequest{Dir: src})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, a.Body); err != nil {
		t.Fatal(err)
	}
	a.Body.Close()
	if err := a.Complete(); err != nil {
		t.Fatalf("Complete = %v", err)
	}
	names := map[string]bool{}
	tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names[h.Name] = true
	}
	if !names["a.txt"] {
		t.Fatalf("archive entries %v; want a.txt", names)
	}
	dst, err := os.MkdirTemp("/tmp", "hac-dst")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dst)
	rep, err := c.Extract(ctx, dst, bytes.NewReader(buf.Bytes()))
	if err != nil || !rep.Success || rep.Files != 1 || rep.Dir != dst {
		t.Fatalf("Extract = %+v, %v", rep, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "a.txt")); string(b) != "hello" {
		t.Fatalf("extracted a.txt = %q", b)
	}
	if _, err := c.Extract(ctx, dst, bytes.NewReader([]byte("not a tar"))); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
		t.Errorf("Extract(garbage) = %v; want VALIDATION_FAILED", err)
	}
}

// TestArchiveIncomplete: a stream without the stats trailer is not a complete archive, and
// one with the error trailer is that error.
func TestArchiveIncomplete(t *testing.T) {
	for _, tc := range []struct {
		trailer, value string
		code           errdefs.Code
	}{
		{"", "", errdefs.CodeInternal},
		{agentapi.TrailerArchiveError, `{"code":"NO_SPACE","message":"disk full","httpStatus":507}`, errdefs.CodeNoSpace},
	} {
		c := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
			if tc.trailer != "" {
				w.Header().Set("Trailer", tc.trailer)
			}
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, "partial")
			if tc.trailer != "" {
				w.Header().Set(tc.trailer, tc.value)
			}
		})
		a, err := c.Archive(context.Background(), agentapi.ArchiveRequest{Dir: "/tmp"})
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, a.Body)
		a.Body.Close()
		if err := a.Complete(); !errdefs.IsCode(err, tc.code) {
			t.Errorf("trailer %q: Complete = %v; want %s", tc.trailer, err, tc.code)
		}
	}
}

// TestForward: the relay fills the route's wildcard escaped, passes the query and a resumed
// stream's Last-Event-ID, and returns the agent's reply as it is.
func TestForward(t *testing.T) {
	var got *http.Request
	c := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.WriteHeader(http.StatusTeapot)
	})
	rt := agentapi.Public("streamProcessLogs")
	pub := httptest.NewRequest("GET", "/v1/sandboxes/sb1/process/a%2Fb/stream?stdoutOffset=3", nil)
	pub.SetPathValue("pid", "a/b")
	pub.Header.Set("Last-Event-ID", "3,4")
	resp, err := c.Forward(pub, rt, http.NoBody, 0)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("status %d", resp.StatusCode)
	}
	if got.URL.EscapedPath() != "/api/process/a%2Fb/stream" || got.URL.RawQuery != "stdoutOffset=3" ||
		got.Header.Get("Last-Event-ID") != "3,4" || got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("agent got %s %s?%s %v", got.Method, got.URL.EscapedPath(), got.URL.RawQuery, got.Header)
	}
	up := agentapi.Public("uploadFile")
	pub = httptest.NewRequest("PUT", "/v1/sandboxes/sb1/files?path=x", nil)
	pub.Header.Set("Content-Type", "application/octet-stream")
	resp, err = c.Forward(pub, up, bytes.NewReader([]byte("abc")), 3)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got.Method != "PUT" || got.URL.Path != "/api/files" || got.Header.Get("Content-Type") != "application/octet-stream" || got.ContentLength != 3 {
		t.Errorf("upload: agent got %s %s %v %d", got.Method, got.URL.Path, got.Header, got.ContentLength)
	}
}

// TestDialTerminalRefused: a refused upgrade is the agent's envelope.
func TestDialTerminalRefused(t *testing.T) {
	c, _ := startAgent(t)
	_, err := c.DialTerminal(context.Background(), "t1", url.Values{agentapi.QueryTerminalCols: {"0"}})
	if !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
		t.Fatalf("DialTerminal(cols=0) = %v; want VALIDATION_FAILED", err)
	}
	conn, err := c.DialTerminal(context.Background(), "t1", url.Values{})
	if err != nil {
		t.Fatalf("DialTerminal = %v", err)
	}
	conn.CloseNow()
}
