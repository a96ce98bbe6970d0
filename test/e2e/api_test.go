package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
)

// TestConcurrentGetOrCreate: 20 clients ask for one new ID at once; exactly one sandbox exists
// and exactly one call reports that it created it.
func TestConcurrentGetOrCreate(t *testing.T) {
	requireEnv(t)
	const id = "e2e-race"
	t.Cleanup(func() { d.Client().SandboxHandle(id).Destroy(ctxT(t, time.Minute)) })
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		errs    []error
	)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := d.Client() // a client (connection pool) per caller
			sb, err := c.Sandbox(ctxT(t, 5*time.Minute), id, &client.SandboxOptions{InstanceType: "lite"})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			if sb.Created() {
				created++
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of 20 calls failed, first: %v", len(errs), errs[0])
	}
	if created != 1 {
		t.Fatalf("%d calls created the sandbox; want exactly 1", created)
	}
	list, err := d.Client().ListSandboxes(ctxT(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sb := range list {
		if sb.ID == id {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("list has %d sandboxes named %q; want 1", n, id)
	}
	if got := countRuncContainers(t, id); got != 1 {
		t.Fatalf("runc has %d containers for %q; want 1", got, id)
	}
}

// TestBadInput sends bad requests; each gets a clear error with its code and changes nothing.
func TestBadInput(t *testing.T) {
	requireEnv(t)
	sb := sandbox(t, "e2e-bad", &client.SandboxOptions{InstanceType: "lite"})
	if err := sb.WriteFile(ctxT(t, time.Minute), "/workspace/keep.txt", []byte("original")); err != nil {
		t.Fatal(err)
	}
	before := sandboxIDs(t)
	huge := bytes.Repeat([]byte("a"), 49<<20)
	tests := []struct {
		name       string
		method     string
		path       string
		body       []byte
		token      string // "" = the right one; "-" = none
		wantStatus int
		wantCode   errdefs.Code
	}{
		{"invalid id", "POST", "/v1/sandboxes", []byte(`{"id":"Bad_ID"}`), "", 400, errdefs.CodeInvalidSandboxID},
		{"too long id", "POST", "/v1/sandboxes", []byte(`{"id":"` + strings.Repeat("a", 64) + `"}`), "", 400, errdefs.CodeInvalidSandboxID},
		{"hyphen id", "POST", "/v1/sandboxes", []byte(`{"id":"-x"}`), "", 400, errdefs.CodeInvalidSandboxID},
		{"empty id", "POST", "/v1/sandboxes", []byte(`{}`), "", 400, errdefs.CodeInvalidSandboxID},
		{"reserved id", "POST", "/v1/sandboxes", []byte(`{"id":"api"}`), "", 400, errdefs.CodeReservedSandboxID},
		{"bad instance type", "POST", "/v1/sandboxes", []byte(`{"id":"e2e-new","instanceType":"huge"}`), "", 400, errdefs.CodeInvalidInstance},
		{"malformed json create", "POST", "/v1/sandboxes", []byte(`{"id":`), "", 400, errdefs.CodeInvalidJSON},
		{"malformed json exec", "POST", "/v1/sandboxes/e2e-bad/execute", []byte(`{"command": "rm -rf /workspace"`), "", 400, errdefs.CodeInvalidJSON},
		{"path with NUL", "POST", "/v1/sandboxes/e2e-bad/write", []byte(`{"path":"/workspace/keep.txt\u0000x","content":"evil"}`), "", 400, errdefs.CodeInvalidPath},
		{"huge body", "POST", "/v1/sandboxes/e2e-bad/write", append(append([]byte(`{"path":"/workspace/keep.txt","content":"`), huge...), '"', '}'), "", 413, errdefs.CodeRequestTooLarge},
		{"unknown sandbox", "POST", "/v1/sandboxes/e2e-nope/execute", []byte(`{"command":"true"}`), "", 404, errdefs.CodeSandboxNotFound},
		{"unknown sandbox get", "GET", "/v1/sandboxes/e2e-nope", nil, "", 404, errdefs.CodeSandboxNotFound},
		{"invalid id in path", "GET", "/v1/sandboxes/NOPE", nil, "", 400, errdefs.CodeInvalidSandboxID},
		{"missing token", "GET", "/v1/sandboxes", nil, "-", 401, errdefs.CodeUnauthenticated},
		{"wrong token", "POST", "/v1/sandboxes", []byte(`{"id":"e2e-new"}`), "0000", 401, errdefs.CodeUnauthenticated},
		{"unknown route", "GET", "/v1/nothing", nil, "", 404, errdefs.CodeNotFound},
		{"wrong method", "GET", "/v1/sandboxes/e2e-bad/execute", nil, "", 405, errdefs.CodeMethodNotAllowed},
		{"unknown sandbox operation", "POST", "/v1/sandboxes/e2e-bad/nothing", []byte(`{}`), "", 404, errdefs.CodeNotFound},
		{"empty command", "POST", "/v1/sandboxes/e2e-bad/execute", []byte(`{"command":""}`), "", 400, errdefs.CodeInvalidCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctxT(t, time.Minute), tt.method, d.URL()+tt.path, bytes.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			switch tt.token {
			case "":
				req.Header.Set("Authorization", "Bearer "+d.Token)
			case "-":
			default:
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			var env errdefs.Envelope
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatalf("reply is not an error envelope: %q", body)
			}
			if resp.StatusCode != tt.wantStatus || env.Code != tt.wantCode || env.HTTPStatus != tt.wantStatus || env.Message == "" {
				t.Fatalf("%s %s = %d %+v; want %d %s with a message", tt.method, tt.path, resp.StatusCode, env, tt.wantStatus, tt.wantCode)
			}
		})
	}
	// Nothing changed.
	got, err := sb.ReadFile(ctxT(t, time.Minute), "/workspace/keep.txt")
	if err != nil || string(got.Content) != "original" {
		t.Fatalf("keep.txt after bad input = %q, %v; want \"original\"", got.Content, err)
	}
	if after := sandboxIDs(t); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("sandboxes changed: before %v, after %v", before, after)
	}
}

func sandboxIDs(t *testing.T) []string {
	t.Helper()
	list, err := d.Client().ListSandboxes(ctxT(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sb := range list {
		ids = append(ids, sb.ID)
	}
	return ids
}
