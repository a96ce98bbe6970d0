package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

const testToken = "test-token"

// newTestClient starts an httptest server that checks the bearer token the way hutchd does
// and then serves mux, and returns a Client for it.
func newTestClient(t *testing.T, mux http.Handler) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/health" && r.Header.Get("Authorization") != "Bearer "+testToken {
			writeEnvelope(w, errdefs.New(errdefs.CodeUnauthenticated, "missing or wrong token"))
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, testToken)
	if err != nil {
		t.Fatalf("New(%q) = %v", srv.URL, err)
	}
	return c
}

// writeEnvelope writes err as hutchd's error envelope.
func writeEnvelope(w http.ResponseWriter, err error) {
	env := errdefs.ToEnvelope(err, "")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(env.HTTPStatus)
	_ = json.NewEncoder(w).Encode(env)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// readJSON decodes a request body into a generic map.
func readJSON(t *testing.T, r *http.Request) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		t.Errorf("decode request body: %v", err)
	}
	return m
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"127.0.0.1:7411", "ftp://x", "http://", "://"} {
		if _, err := New(u, "t"); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("New(%q) = %v; want ErrInvalidArgument", u, err)
		}
	}
	c, err := New("", "t")
	if err != nil || c.BaseURL() != DefaultURL {
		t.Errorf("New(\"\") = %v, %v; want base %s", c, err, DefaultURL)
	}
	c, err = New("http://127.0.0.1:7411/prefix/", "t")
	if err != nil || c.BaseURL() != "http://127.0.0.1:7411/prefix" {
		t.Errorf("New with path: base %q, err %v", c.BaseURL(), err)
	}
}

func TestErrorEnvelopeMapping(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		wantCode  errdefs.Code
		wantClass error
	}{
		{
			name:   "file not found",
			status: 404,
			body: `{"code":"FILE_NOT_FOUND","message":"file not found: /x","httpStatus":404,` +
				`"context":{"path":"/x"},"operation":"file.read","timestamp":"2025-01-01T00:00:00Z"}`,
			wantCode: errdefs.CodeFileNotFound, wantClass: errdefs.ErrNotFound,
		},
		{
			name:     "sandbox not found",
			status:   404,
			body:     `{"code":"SANDBOX_NOT_FOUND","message":"no sandbox","httpStatus":404,"timestamp":"2025-01-01T00:00:00Z"}`,
			wantCode: errdefs.CodeSandboxNotFound, wantClass: errdefs.ErrNotFound,
		},
		{
			name:     "timeout",
			status:   408,
			body:     `{"code":"COMMAND_TIMEOUT","message":"timed out","httpStatus":408,"timestamp":"2025-01-01T00:00:00Z"}`,
			wantCode: errdefs.CodeCommandTimeout, wantClass: errdefs.ErrDeadlineExceeded,
		},
		{
			name:     "unknown code classed by status",
			status:   409,
			body:     `{"code":"SOME_FUTURE_CODE","message":"new","httpStatus":409,"timestamp":"2025-01-01T00:00:00Z"}`,
			wantCode: "SOME_FUTURE_CODE", wantClass: errdefs.ErrConflict,
		},
		{
			name:     "unknown code without httpStatus uses the reply status",
			status:   404,
			body:     `{"code":"SOME_FUTURE_CODE","message":"new"}`,
			wantCode: "SOME_FUTURE_CODE", wantClass: errdefs.ErrNotFound,
		},
		{
			name:     "non-JSON body",
			status:   502,
			body:     "<html>bad gateway</html>",
			wantCode: errdefs.CodeInternal, wantClass: errdefs.ErrInternal,
		},
		{
			name:     "empty body",
			status:   500,
			body:     "",
			wantCode: errdefs.CodeInternal, wantClass: errdefs.ErrInternal,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("POST /v1/sandboxes/box/read", func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			c := newTestClient(t, mux)
			_, err := c.SandboxHandle("box").ReadFile(t.Context(), "/x")
			if err == nil {
				t.Fatal("ReadFile = nil error")
			}
			if !errdefs.IsCode(err, tt.wantCode) {
				t.Errorf("ReadFile error %v: code %s; want %s", err, errdefs.CodeOf(err), tt.wantCode)
			}
			if !errors.Is(err, tt.wantClass) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.wantClass)
			}
			if !strings.Contains(err.Error(), `sandbox "box"`) {
				t.Errorf("error %q lacks the sandbox context", err)
			}
		})
	}
}

func TestErrorContextSurvives(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/box/read", func(w http.ResponseWriter, r *http.Request) {
		writeEnvelope(w, errdefs.New(errdefs.CodeFileNotFound, "file not found").With("path", "/nope"))
	})
	c := newTestClient(t, mux)
	_, err := c.SandboxHandle("box").ReadFile(t.Context(), "/nope")
	var e *errdefs.Error
	if !errors.As(err, &e) {
		t.Fatalf("ReadFile error %v is not an *errdefs.Error", err)
	}
	if e.Context["path"] != "/nope" {
		t.Errorf("context = %v; want path /nope", e.Context)
	}
	if !errors.Is(err, errdefs.New(errdefs.CodeFileNotFound, "")) {
		t.Errorf("errors.Is(err, FILE_NOT_FOUND error) = false")
	}
}

func TestUnauthenticated(t *testing.T) {
	c := newTestClient(t, http.NewServeMux())
	bad, err := New(c.BaseURL(), "wrong")
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.ListSandboxes(t.Context())
	if !errors.Is(err, errdefs.ErrUnauthenticated) || !errdefs.IsCode(err, errdefs.CodeUnauthenticated) {
		t.Errorf("ListSandboxes with a wrong token = %v; want UNAUTHENTICATED", err)
	}
}

func TestUnreachableIsUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := New("http://"+addr, testToken)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListSandboxes(t.Context())
	if !errdefs.IsCode(err, errdefs.CodeUnavailable) || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("ListSandboxes on a closed port = %v; want UNAVAILABLE", err)
	}
}

func TestCancelledContextIsContextError(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	c := newTestClient(t, mux)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.ListSandboxes(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ListSandboxes with an expiring ctx = %v; want context.DeadlineExceeded", err)
	}
}

func TestSandboxGetOrCreate(t *testing.T) {
	mux := http.NewServeMux()
	existing := map[string]bool{"old": true}
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		if ua := r.Header.Get("User-Agent"); ua != "hutch-test" {
			t.Errorf("User-Agent = %q", ua)
		}
		body := readJSON(t, r)
		id, _ := body["id"].(string)
		status := http.StatusCreated
		if existing[id] {
			status = http.StatusOK
		}
		if id == "new" {
			if body["image"] != "default" || body["instanceType"] != "lite" {
				t.Errorf("create body = %v", body)
			}
			if env, _ := body["envVars"].(map[string]any); env["A"] != "1" {
				t.Errorf("create envVars = %v", body["envVars"])
			}
		}
		writeJSON(w, status, map[string]any{"id": id, "status": "running", "image": "default",
			"instanceType": "lite", "createdAt": "2025-01-01T00:00:00Z"})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := New(srv.URL, testToken, WithUserAgent("hutch-test"), WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Sandbox(t.Context(), "new", &SandboxOptions{Image: "default", InstanceType: "lite", EnvVars: map[string]string{"A": "1"}})
	if err != nil {
		t.Fatalf("Sandbox(new) = %v", err)
	}
	if sb.ID() != "new" || !sb.Created() {
		t.Errorf("Sandbox(new) = id %q created %v; want new, true", sb.ID(), sb.Created())
	}
	sb, err = c.Sandbox(t.Context(), "old", nil)
	if err != nil || sb.Created() {
		t.Errorf("Sandbox(old) = created %v, %v; want false, nil", sb.Created(), err)
	}
	if _, err := c.Sandbox(t.Context(), "", nil); !errdefs.IsCode(err, errdefs.CodeInvalidSandboxID) {
		t.Errorf("Sandbox(\"\") = %v; want INVALID_SANDBOX_ID", err)
	}
}

func TestSandboxRecords(t *testing.T) {
	rec := map[string]any{"id": "box", "status": "running", "image": "default", "instanceType": "basic",
		"envVars": map[string]string{"K": "V"}, "createdAt": "2025-01-02T03:04:05Z",
		"startedAt": "2025-01-02T03:04:06Z", "address": "10.0.0.2"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"sandboxes": []any{rec}})
	})
	mux.HandleFunc("GET /v1/sandboxes/box", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, rec)
	})
	mux.HandleFunc("GET /v1/sandboxes/gone", func(w http.ResponseWriter, r *http.Request) {
		writeEnvelope(w, errdefs.New(errdefs.CodeSandboxNotFound, "sandbox gone not found"))
	})
	mux.HandleFunc("POST /v1/sandboxes/box/stop", func(w http.ResponseWriter, r *http.Request) {
		stopped := map[string]any{"id": "box", "status": "stopped", "createdAt": "2025-01-02T03:04:05Z"}
		writeJSON(w, 200, stopped)
	})
	mux.HandleFunc("DELETE /v1/sandboxes/box", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"success": true, "id": "box"})
	})
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			t.Errorf("health without the token header")
		}
		writeJSON(w, 200, map[string]any{"status": "ok", "version": "1.2.3"})
	})
	c := newTestClient(t, mux)
	ctx := t.Context()

	list, err := c.ListSandboxes(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("ListSandboxes = %v, %v", list, err)
	}
	want := SandboxInfo{ID: "box", Status: StatusRunning, Image: "default", InstanceType: "basic",
		EnvVars: map[string]string{"K": "V"}, CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		StartedAt: time.Date(2025, 1, 2, 3, 4, 6, 0, time.UTC), Address: "10.0.0.2"}
	got := list[0]
	if got.ID != want.ID || got.Status != want.Status || got.InstanceType != want.InstanceType ||
		got.EnvVars["K"] != "V" || !got.CreatedAt.Equal(want.CreatedAt) || !got.StartedAt.Equal(want.StartedAt) ||
		got.Address != want.Address {
		t.Errorf("ListSandboxes()[0] = %+v; want %+v", got, want)
	}
	info, err := c.SandboxHandle("box").Info(ctx)
	if err != nil || info.ID != "box" {
		t.Errorf("Info = %+v, %v", info, err)
	}
	if _, err := c.GetSandbox(ctx, "gone"); !errors.Is(err, errdefs.ErrNotFound) || !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Errorf("GetSandbox(gone) = %v; want SANDBOX_NOT_FOUND", err)
	}
	st, err := c.SandboxHandle("box").Stop(ctx)
	if err != nil || st.Status != StatusStopped || !st.StartedAt.IsZero() {
		t.Errorf("Stop = %+v, %v", st, err)
	}
	if err := c.SandboxHandle("box").Destroy(ctx); err != nil {
		t.Errorf("Destroy = %v", err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Status != "ok" || h.Version != "1.2.3" {
		t.Errorf("Health = %+v, %v", h, err)
	}
}
