package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
)

// fakeHutchd is a small stand-in for hutchd that emits its documented replies.
type fakeHutchd struct {
	t *testing.T

	mu       sync.Mutex
	lastExec map[string]any    // guarded by mu
	files    map[string][]byte // guarded by mu
}

func (f *fakeHutchd) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		if body["id"] == "bad" {
			envelope(w, errdefs.New(errdefs.CodeSandboxStartFailed, "sandbox bad failed to start"))
			return
		}
		if v, ok := body["sleepAfter"]; ok { // hutchd's rule: a duration of at least 1s
			if d, err := time.ParseDuration(fmt.Sprint(v)); err != nil || d < time.Second {
				envelope(w, errdefs.Newf(errdefs.CodeInvalidArgument, "sleepAfter %v: must be at least 1s", v))
				return
			}
		}
		status := http.StatusOK
		if body["id"] == "fresh" {
			status = http.StatusCreated
		}
		reply(w, status, map[string]any{"id": body["id"], "status": "running", "image": "default",
			"instanceType": "standard-1", "createdAt": "2025-01-01T00:00:00Z"})
	})
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, map[string]any{"sandboxes": []any{
			map[string]any{"id": "alpha", "status": "running", "image": "default", "instanceType": "lite", "createdAt": "2025-01-01T00:00:00Z"},
			map[string]any{"id": "beta", "status": "stopped", "image": "py", "instanceType": "basic", "createdAt": "2025-01-01T00:00:00Z"},
		}})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "alpha" {
			envelope(w, errdefs.New(errdefs.CodeSandboxNotFound, fmt.Sprintf("sandbox %q not found", r.PathValue("id"))))
			return
		}
		reply(w, 200, map[string]any{"id": "alpha", "status": "running", "image": "default", "instanceType": "lite",
			"createdAt": "2025-01-01T00:00:00Z", "envVars": map[string]string{"K": "V"}})
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/execute/stream", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.lastExec = body
		f.mu.Unlock()
		sw := sse.NewWriter(w)
		cmd, _ := body["command"].(string)
		_ = sw.Send(map[string]any{"type": "start", "command": cmd, "pid": 7, "sessionId": "default"})
		switch {
		case strings.HasPrefix(cmd, "exit "):
			_ = sw.Send(map[string]any{"type": "stdout", "data": "out1 "})
			_ = sw.Send(map[string]any{"type": "stderr", "data": "err1\n"})
			_ = sw.Send(map[string]any{"type": "stdout", "data": "out2\n"})
			var code int
			fmt.Sscanf(cmd, "exit %d", &code)
			_ = sw.Send(map[string]any{"type": "complete", "exitCode": code, "duration": 5})
		case cmd == "sleep 10":
			_ = sw.Send(map[string]any{"type": "error", "code": "COMMAND_TIMEOUT", "error": "command timed out after 100ms"})
		case cmd == "oom":
			_ = sw.Send(map[string]any{"type": "complete", "exitCode": 137, "duration": 5, "reason": "oom-killed"})
		case cmd == "cut":
			_ = sw.Send(map[string]any{"type": "stdout", "data": "partial"})
			// The stream ends without complete or error.
		default:
			_ = sw.Send(map[string]any{"type": "complete", "exitCode": 0, "duration": 1})
		}
	})
	mux.HandleFunc("PUT /v1/sandboxes/{id}/files", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			f.t.Errorf("PUT body: %v", err)
		}
		f.mu.Lock()
		f.files[r.URL.Query().Get("path")] = b
		f.mu.Unlock()
		reply(w, 200, map[string]any{"success": true, "path": r.URL.Query().Get("path"), "size": len(b)})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/files", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		b, ok := f.files[r.URL.Query().Get("path")]
		f.mu.Unlock()
		if !ok {
			envelope(w, errdefs.New(errdefs.CodeFileNotFound, "file not found: "+r.URL.Query().Get("path")))
			return
		}
		w.Header().Set("X-Hutch-Binary", "true")
		_, _ = w.Write(b)
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/list-files", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, map[string]any{"success": true, "path": "/w", "count": 2, "files": []any{
			map[string]any{"name": "src", "absolutePath": "/w/src", "relativePath": "src", "type": "directory",
				"size": 4096, "modifiedAt": "2025-01-01T00:00:00Z", "mode": "rwxr-xr-x"},
			map[string]any{"name": "a.txt", "absolutePath": "/w/a.txt", "relativePath": "a.txt", "type": "file",
				"size": 3, "modifiedAt": "2025-01-01T00:00:00Z", "mode": "rw-r--r--"},
		}})
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/git/checkout", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		if body["branch"] != "dev" || body["depth"] != float64(1) || body["targetDir"] != "/w/r" || body["sessionId"] != "s" {
			f.t.Errorf("checkout body = %v", body)
		}
		reply(w, 200, map[string]any{"success": true, "repoUrl": body["repoUrl"], "branch": "dev", "targetDir": "/w/r"})
	})
	mux.HandleFunc("POST /v1/images/build", func(w http.ResponseWriter, r *http.Request) {
		sw := sse.NewWriter(w)
		_ = sw.Send(map[string]any{"type": "progress", "message": "step 1"})
		_ = sw.Send(map[string]any{"type": "progress", "message": "step 2"})
		_ = sw.Send(map[string]any{"type": "complete", "image": map[string]any{"id": "img1", "name": "default",
			"packages": []string{"bash"}, "createdAt": "2025-01-01T00:00:00Z", "sizeBytes": 3 << 20}})
	})
	mux.HandleFunc("GET /v1/images", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, map[string]any{"images": []any{map[string]any{"id": "img1", "name": "default",
			"packages": []string{"bash", "git"}, "createdAt": "2025-01-01T00:00:00Z", "sizeBytes": 3 << 20}}})
	})
	mux.HandleFunc("DELETE /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, map[string]any{"success": true, "id": r.PathValue("id")})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			envelope(w, errdefs.New(errdefs.CodeUnauthenticated, "missing or wrong token"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func envelope(w http.ResponseWriter, err error) {
	env := errdefs.ToEnvelope(err, "")
	reply(w, env.HTTPStatus, env)
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs hutch against url with the given stdin.
func run(t *testing.T, url, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	env := envOf(map[string]string{"HUTCH_URL": url, "HUTCH_TOKEN": "tok", "HUTCH_STATE_DIR": t.TempDir()})
	code := Main(t.Context(), args, strings.NewReader(stdin), &out, &errb, env)
	return result{code, out.String(), errb.String()}
}

func newFake(t *testing.T) (*fakeHutchd, string) {
	f := &fakeHutchd{t: t, files: map[string][]byte{}}
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func TestExecCommand(t *testing.T) {
	f, url := newFake(t)

	r := run(t, url, "", "exec", "box", "--", "exit 3")
	if r.code != 3 || r.stdout != "out1 out2\n" || r.stderr != "err1\n" {
		t.Errorf("hutch exec box -- 'exit 3' = %+v; want code 3 and the streams", r)
	}

	r = run(t, url, "input data", "exec", "--session", "s1", "-w", "/tmp", "-e", "A=1", "-e", "B=x=y",
		"--timeout", "1500ms", "--stdin", "box", "--", "printf", "%s", "a b")
	if r.code != 0 {
		t.Fatalf("exec with flags = %+v", r)
	}
	f.mu.Lock()
	got := f.lastExec
	f.mu.Unlock()
	env, _ := got["env"].(map[string]any)
	if got["command"] != `'printf' '%s' 'a b'` || got["sessionId"] != "s1" || got["cwd"] != "/tmp" ||
		got["timeoutMs"] != float64(1500) || got["stdin"] != "input data" || env["A"] != "1" || env["B"] != "x=y" {
		t.Errorf("exec request = %v", got)
	}

	// The reason of a kill goes to stderr; the exit code is the command's.
	r = run(t, url, "", "exec", "box", "--", "oom")
	if r.code != 137 || r.stderr != "hutch: the command was killed (exit 137): oom-killed\n" {
		t.Errorf("hutch exec of an OOM-killed command = %+v; want code 137 and the reason on stderr", r)
	}

	// A sandbox the call created is named on stderr (a mistyped name makes a new one); an
	// existing one is not.
	r = run(t, url, "", "exec", "fresh", "--", "exit 3")
	if want := "hutch: created sandbox fresh (none had that name; 'hutch destroy fresh' removes it)\nerr1\n"; r.code != 3 || r.stderr != want {
		t.Errorf("hutch exec in a new sandbox = %+v; want stderr %q", r, want)
	}

	// Flags after NAME but before "--" are parsed; "--" protects the command's own flags.
	r = run(t, url, "", "exec", "box", "-s", "s2", "--", "ls", "-la")
	f.mu.Lock()
	got = f.lastExec
	f.mu.Unlock()
	if r.code != 0 || got["command"] != `'ls' '-la'` || got["sessionId"] != "s2" {
		t.Errorf("exec with flags before -- = %+v, request %v", r, got)
	}
}

func TestExecFailures(t *testing.T) {
	_, url := newFake(t)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"timeout", []string{"exec", "box", "--timeout", "100ms", "--", "sleep 10"}, ExitTimeout, "(COMMAND_TIMEOUT)"},
		{"stream cut", []string{"exec", "box", "--", "cut"}, ExitHutchFailed, "(STREAM_INCOMPLETE)"},
		{"sandbox start failed", []string{"exec", "bad", "--", "true"}, ExitHutchFailed, "(SANDBOX_START_FAILED)"},
		{"no command", []string{"exec", "box"}, ExitUsage, "want NAME -- CMD"},
		{"two words before dash", []string{"exec", "box", "extra", "--", "true"}, ExitUsage, "want NAME -- CMD"},
		{"bad env", []string{"exec", "-e", "NOPE", "box", "--", "true"}, ExitUsage, "KEY=VALUE"},
		{"unknown flag", []string{"exec", "--bogus", "box", "--", "true"}, ExitUsage, "bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, url, "", tt.args...)
			if r.code != tt.wantCode || !strings.Contains(r.stderr, tt.wantErr) || !strings.HasPrefix(r.stderr, "hutch: ") {
				t.Errorf("hutch %q = %+v; want code %d and stderr with %q", tt.args, r, tt.wantCode, tt.wantErr)
			}
		})
	}
	// The stream's partial output still reached stdout before the failure.
	if r := run(t, url, "", "exec", "box", "--", "cut"); r.stdout != "partial" {
		t.Errorf("cut stream stdout = %q; want partial", r.stdout)
	}

	// An unreachable hutchd: exec fails with 125, other commands with 1.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	if r := run(t, dead, "", "exec", "box", "--", "true"); r.code != ExitHutchFailed || !strings.Contains(r.stderr, "(UNAVAILABLE)") {
		t.Errorf("exec against a dead hutchd = %+v", r)
	}
	if r := run(t, dead, "", "list"); r.code != ExitError || !strings.Contains(r.stderr, "(UNAVAILABLE)") {
		t.Errorf("list against a dead hutchd = %+v", r)
	}
}

func TestFileCommands(t *testing.T) {
	f, url := newFake(t)
	data := "binary\x00\xff data\n"
	if r := run(t, url, data, "write", "box", "/w/f.bin"); r.code != 0 || r.stderr != "" {
		t.Fatalf("write = %+v", r)
	}
	f.mu.Lock()
	stored := string(f.files["/w/f.bin"])
	f.mu.Unlock()
	if stored != data {
		t.Errorf("server stored %q; want %q", stored, data)
	}
	if r := run(t, url, "", "read", "box", "/w/f.bin"); r.code != 0 || r.stdout != data {
		t.Errorf("read = %+v", r)
	}
	r := run(t, url, "", "read", "box", "/nope")
	if r.code != ExitError || r.stderr != "hutch: open /nope in sandbox \"box\": file not found: /nope (FILE_NOT_FOUND)\n" {
		t.Errorf("read missing = %+v", r)
	}
}

func TestSandboxCommands(t *testing.T) {
	_, url := newFake(t)
	r := run(t, url, "", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "ID") || !strings.Contains(r.stdout, "alpha") || !strings.Contains(r.stdout, "stopped") {
		t.Errorf("list = %+v", r)
	}
	r = run(t, url, "", "list", "--json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 2 {
		t.Errorf("list --json = %q (%v)", r.stdout, err)
	}
	r = run(t, url, "", "status", "alpha")
	if r.code != 0 || !strings.Contains(r.stdout, "Instance type:") || !strings.Contains(r.stdout, "K=V") {
		t.Errorf("status = %+v", r)
	}
	r = run(t, url, "", "status", "ghost")
	if r.code != ExitError || !strings.Contains(r.stderr, "(SANDBOX_NOT_FOUND)") {
		t.Errorf("status ghost = %+v", r)
	}
	if r = run(t, url, "", "create", "fresh"); r.code != 0 || r.stdout != "fresh created\n" {
		t.Errorf("create fresh = %+v", r)
	}
	if r = run(t, url, "", "create", "old", "--image", "py"); r.code != 0 || !strings.Contains(r.stdout, "already exists") {
		t.Errorf("create old = %+v", r)
	}
	// A given --sleep-after is sent as given: 0 reaches hutchd, which refuses it.
	if r = run(t, url, "", "create", "fresh", "--sleep-after", "0"); r.code != ExitError || !strings.Contains(r.stderr, "(VALIDATION_FAILED)") {
		t.Errorf("create --sleep-after 0 = %+v; want VALIDATION_FAILED", r)
	}
	if r = run(t, url, "", "create", "fresh", "--sleep-after", "30s"); r.code != 0 || r.stdout != "fresh created\n" {
		t.Errorf("create --sleep-after 30s = %+v", r)
	}
	if r = run(t, url, "", "destroy", "alpha"); r.code != 0 || r.stdout != "alpha destroyed\n" {
		t.Errorf("destroy = %+v", r)
	}
	if r = run(t, url, "", "status"); r.code != ExitUsage {
		t.Errorf("status without NAME = %+v; want usage error", r)
	}

	// A wrong token is UNAUTHENTICATED.
	var out, errb bytes.Buffer
	code := Main(t.Context(), []string{"--token", "wrong", "list"}, strings.NewReader(""), &out, &errb,
		envOf(map[string]string{"HUTCH_URL": url}))
	if code != ExitError || !strings.Contains(errb.String(), "(UNAUTHENTICATED)") {
		t.Errorf("list with a wrong token = %d %q", code, errb.String())
	}
}

func TestMiscCommands(t *testing.T) {
	_, url := newFake(t)
	r := run(t, url, "", "ls", "box", "/w")
	if r.code != 0 || !strings.Contains(r.stdout, "drwxr-xr-x") || !strings.Contains(r.stdout, "src/") ||
		!strings.Contains(r.stdout, "-rw-r--r--") || !strings.Contains(r.stdout, "a.txt") {
		t.Errorf("ls = %+v", r)
	}
	r = run(t, url, "", "checkout", "box", "https://example.invalid/r.git", "-b", "dev", "--depth", "1", "--dir", "/w/r", "-s", "s")
	if r.code != 0 || r.stdout != "cloned https://example.invalid/r.git (branch dev) into /w/r\n" {
		t.Errorf("checkout = %+v", r)
	}
	r = run(t, url, "", "image", "build")
	if r.code != 0 || r.stderr != "step 1\nstep 2\n" || r.stdout != "image default (img1) ready, 3.0 MiB\n" {
		t.Errorf("image build = %+v", r)
	}
	r = run(t, url, "", "image", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "bash,git") || !strings.Contains(r.stdout, "3.0 MiB") {
		t.Errorf("image list = %+v", r)
	}
	if r = run(t, url, "", "image"); r.code != ExitUsage {
		t.Errorf("image without a subcommand = %+v", r)
	}
}

func TestFormatError(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{errdefs.New(errdefs.CodeFileNotFound, "file not found: /x"), "hutch: file not found: /x (FILE_NOT_FOUND)"},
		{fmt.Errorf("read /x: %w", errdefs.New(errdefs.CodeFileNotFound, "gone")), "hutch: read /x: gone (FILE_NOT_FOUND)"},
		{errors.New("plain"), "hutch: plain"},
	}
	for _, tt := range tests {
		if got := FormatError(tt.err); got != tt.want {
			t.Errorf("FormatError(%v) = %q; want %q", tt.err, got, tt.want)
		}
	}
}

func TestFmtBytes(t *testing.T) {
	tests := map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536 << 20: "1.5 GiB"}
	for n, want := range tests {
		if got := fmtBytes(n); got != want {
			t.Errorf("fmtBytes(%d) = %q; want %q", n, got, want)
		}
	}
}
