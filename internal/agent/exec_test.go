package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/internal/agent/session"
	"github.com/hutchdev/hutch/internal/testutil"
)

func requirePython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
}

func TestPing(t *testing.T) {
	a := startAgent(t)
	status, out := a.do(http.MethodGet, "/api/ping", nil)
	if status != 200 || out["status"] != "healthy" || out["version"] != "test" || out["success"] != true {
		t.Fatalf("ping = %d %v", status, out)
	}
	if _, err := time.Parse(time.RFC3339, out["timestamp"].(string)); err != nil {
		t.Fatalf("timestamp: %v", err)
	}
}

func TestRouting(t *testing.T) {
	a := startAgent(t)
	status, out := a.do(http.MethodGet, "/api/nope", nil)
	wantError(t, status, out, 404, "NOT_FOUND")
	status, out = a.do(http.MethodGet, "/api/execute", nil)
	wantError(t, status, out, 405, "METHOD_NOT_ALLOWED")
	req, _ := http.NewRequest(http.MethodPost, "http://agent/api/execute", strings.NewReader(`{"command":`))
	resp, err := a.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("truncated JSON = %d; want 400", resp.StatusCode)
	}
	status, out = a.post("/api/execute", obj{"command": 5})
	wantError(t, status, out, 400, "VALIDATION_FAILED")
}

func TestJSONBodyLimit(t *testing.T) {
	a := startAgent(t)
	big := strings.Repeat("x", maxJSONBody+1024)
	status, out := a.post("/api/write", obj{"path": "big.txt", "content": big})
	wantError(t, status, out, 413, "REQUEST_TOO_LARGE")
}

// E1: output order and exit code, buffered and streamed.
func TestExecE1OrderAndExitCode(t *testing.T) {
	a := startAgent(t)
	cmd := `sh -c 'echo out; echo err >&2; exit 3'`
	out := a.exec(obj{"command": cmd})
	if out["stdout"] != "out\n" || out["stderr"] != "err\n" || out["exitCode"] != 3.0 {
		t.Fatalf("execute = %v; want out\\n, err\\n, 3", out)
	}
	if out["sessionId"] != "default" || out["command"] != cmd {
		t.Fatalf("execute = %v", out)
	}
	for range 5 {
		evs := a.stream("/api/execute/stream", obj{"command": cmd})
		var types []string
		for _, ev := range evs {
			types = append(types, ev["type"].(string))
		}
		if got, want := strings.Join(types, ","), "start,stdout,stderr,complete"; got != want {
			t.Fatalf("events = %s; want %s (%v)", got, want, evs)
		}
		if evs[0]["command"] != cmd || evs[0]["sessionId"] != "default" || evs[0]["pid"].(float64) <= 0 {
			t.Fatalf("start = %v", evs[0])
		}
		if evs[1]["data"] != "out\n" || evs[2]["data"] != "err\n" || evs[3]["exitCode"] != 3.0 {
			t.Fatalf("events = %v", evs)
		}
	}
}

func TestExecEmptyCommand(t *testing.T) {
	a := startAgent(t)
	status, out := a.post("/api/execute", obj{"command": ""})
	wantError(t, status, out, 400, "INVALID_COMMAND")
	resp := a.openStream(context.Background(), "/api/execute/stream", obj{"command": ""})
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("stream with empty command = %d; want 400", resp.StatusCode)
	}
}

func TestExecSignalExitCodes(t *testing.T) {
	a := startAgent(t)
	tests := []struct {
		cmd  string
		want float64
	}{
		{"exit 0", 0},
		{"exit 42", 42},
		{"kill -9 $$", 137},
		{"sh -c 'kill -TERM $$'", 143},
		{"false", 1},
	}
	for _, tt := range tests {
		out := a.exec(obj{"command": tt.cmd})
		if out["exitCode"] != tt.want {
			t.Errorf("exec(%q).exitCode = %v; want %v", tt.cmd, out["exitCode"], tt.want)
		}
	}
}

func TestExecMissingCwd(t *testing.T) {
	a := startAgent(t)
	out := a.exec(obj{"command": "echo hi", "cwd": "/nonexistent/dir"})
	if out["exitCode"] != 1.0 || !strings.Contains(out["stderr"].(string), "/nonexistent/dir") || out["stdout"] != "" {
		t.Fatalf("exec with missing cwd = %v; want exit 1 and a message", out)
	}
	// The session still works and kept its cwd.
	out = a.exec(obj{"command": "pwd"})
	if out["stdout"] != a.workdir+"\n" {
		t.Fatalf("pwd = %q; want %q", out["stdout"], a.workdir)
	}
}

// E2: a timeout returns promptly with COMMAND_TIMEOUT and leaves no process behind.
func TestExecE2Timeout(t *testing.T) {
	a := startAgent(t)
	mark := randomMark()
	start := time.Now()
	status, out := a.post("/api/execute", obj{
		"command": "echo partial; sleep 30", "timeoutMs": 1000, "env": obj{"TESTMARK": mark},
	})
	wantError(t, status, out, 408, "COMMAND_TIMEOUT")
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("timeout took %v", d)
	}
	ctx := out["context"].(obj)
	if ctx["stdout"] != "partial\n" || ctx["timeoutMs"] != 1000.0 {
		t.Fatalf("context = %v; want partial stdout and timeoutMs", ctx)
	}
	if pids := session.FindMarked("TESTMARK", mark); len(pids) != 0 {
		t.Fatalf("processes left after timeout: %v", pids)
	}

	// Streaming form: an error event with the code, and nothing left.
	mark = randomMark()
	evs := a.stream("/api/execute/stream", obj{"command": "sleep 30", "timeoutMs": 500, "env": obj{"TESTMARK": mark}})
	last := evs[len(evs)-1]
	if last["type"] != "error" || last["code"] != "COMMAND_TIMEOUT" {
		t.Fatalf("last event = %v; want error COMMAND_TIMEOUT", last)
	}
	if pids := session.FindMarked("TESTMARK", mark); len(pids) != 0 {
		t.Fatalf("processes left after stream timeout: %v", pids)
	}
	// The session is usable afterwards.
	if out := a.exec(obj{"command": "echo ok"}); out["stdout"] != "ok\n" {
		t.Fatalf("after timeout: %v", out)
	}
}

// E3: the whole tree dies on timeout, including processes that left the process group.
func TestExecE3TreeKill(t *testing.T) {
	a := startAgent(t)
	cmds := []string{
		"sh -c 'sleep 300 & sleep 300 & wait'",
		"setsid sleep 300 & sleep 300",
		"setsid sh -c 'sleep 300 & wait' >/dev/null 2>&1 & wait",
		"(trap '' TERM HUP; setsid -f sleep 300 >/dev/null 2>&1; nohup sleep 300 >/dev/null 2>&1 &); sleep 300",
	}
	for _, cmd := range cmds {
		mark := randomMark()
		status, out := a.post("/api/execute", obj{"command": cmd, "timeoutMs": 1000, "env": obj{"TESTMARK": mark}})
		wantError(t, status, out, 408, "COMMAND_TIMEOUT")
		if pids := session.FindMarked("TESTMARK", mark); len(pids) != 0 {
			t.Errorf("%q: processes left: %v", cmd, pids)
		}
	}
}

// E4: streamed output arrives while the command still runs.
func TestExecE4FirstByteEarly(t *testing.T) {
	requirePython(t)
	a := startAgent(t)
	start := time.Now()
	resp := a.openStream(context.Background(), "/api/execute/stream",
		obj{"command": `python3 -c 'import time; print(1, flush=True); time.sleep(3); print(2)'`})
	defer resp.Body.Close()
	r := sse.NewReader(resp.Body)
	var firstOut, complete time.Duration
	evs := readEventsTimed(t, r, func(ev event) {
		if ev["type"] == "stdout" && firstOut == 0 {
			firstOut = time.Since(start)
		}
		if ev["type"] == "complete" {
			complete = time.Since(start)
		}
	})
	if got := string(outputOf(t, evs, "stdout")); got != "1\n2\n" {
		t.Fatalf("stdout = %q", got)
	}
	t.Logf("first stdout after %v, complete after %v", firstOut, complete)
	if firstOut == 0 || complete-firstOut < 2*time.Second {
		t.Fatalf("first stdout at %v, complete at %v: output was not streamed", firstOut, complete)
	}
}

func readEventsTimed(t *testing.T, r *sse.Reader, on func(event)) []event {
	t.Helper()
	var evs []event
	for {
		data, err := r.Next()
		if err != nil {
			return evs
		}
		var ev event
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatal(err)
		}
		on(ev)
		evs = append(evs, ev)
	}
}

// E5: stdin is /dev/null unless given.
func TestExecE5Stdin(t *testing.T) {
	requirePython(t)
	a := startAgent(t)
	start := time.Now()
	out := a.exec(obj{"command": `python3 -c 'print(input())'`, "timeoutMs": 20000})
	if out["exitCode"] == 0.0 || !strings.Contains(out["stderr"].(string), "EOFError") {
		t.Fatalf("without stdin = %v; want EOFError", out)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("reading absent stdin took %v", d)
	}
	out = a.exec(obj{"command": `python3 -c 'print(input())'`, "stdin": "50\n"})
	if out["stdout"] != "50\n" || out["exitCode"] != 0.0 {
		t.Fatalf("with stdin = %v; want 50", out)
	}
	out = a.exec(obj{"command": "cat", "stdinBase64": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255})})
	if out["encoding"] != "base64" || out["stdout"] != base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255}) {
		t.Fatalf("binary stdin round trip = %v", out)
	}
	// A large stdin the command never reads must not hang.
	big := strings.Repeat("y", 1<<20)
	out = a.exec(obj{"command": "true", "stdin": big})
	if out["exitCode"] != 0.0 {
		t.Fatalf("unread stdin = %v", out)
	}
	out = a.exec(obj{"command": "wc -c", "stdin": big})
	if strings.TrimSpace(out["stdout"].(string)) != "1048576" {
		t.Fatalf("wc -c of 1 MiB stdin = %v", out["stdout"])
	}
	status, eout := a.post("/api/execute", obj{"command": "cat", "stdinBase64": "!!"})
	wantError(t, status, eout, 400, "VALIDATION_FAILED")
}

// E6 (agent side): a client that drops the stream kills the command's tree.
func TestExecE6DisconnectKillsTree(t *testing.T) {
	a := startAgent(t)
	mark := randomMark()
	ctx, cancel := context.WithCancel(context.Background())
	resp := a.openStream(ctx, "/api/execute/stream", obj{
		"command": "echo started; sh -c 'sleep 300 & setsid sleep 300 & wait'", "env": obj{"TESTMARK": mark},
		"sessionId": "e6",
	})
	r := sse.NewReader(resp.Body)
	for {
		data, err := r.Next()
		if err != nil {
			t.Fatalf("stream ended early: %v", err)
		}
		if strings.Contains(string(data), "started") {
			break
		}
	}
	testutil.Poll(t, 20*time.Millisecond, 10*time.Second, func() bool { return len(session.FindMarked("TESTMARK", mark)) >= 3 })
	cancel()
	resp.Body.Close()
	waitNoMarked(t, mark)
	// The session's lock was released.
	if out := a.exec(obj{"command": "echo again", "sessionId": "e6", "timeoutMs": 10000}); out["stdout"] != "again\n" {
		t.Fatalf("after disconnect: %v", out)
	}
}

func TestExecBinaryOutputRoundTrip(t *testing.T) {
	a := startAgent(t)
	data := make([]byte, 200_000)
	_, _ = rand.Read(data)
	p := filepath.Join(a.workdir, "rand.bin")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	evs := a.stream("/api/execute/stream", obj{"command": "cat rand.bin; head -c 1000 /dev/urandom >/dev/null"})
	if got := outputOf(t, evs, "stdout"); !bytes.Equal(got, data) {
		t.Fatalf("streamed binary output differs: %d bytes, want %d", len(got), len(data))
	}
	for _, ev := range evs {
		if ev["type"] == "stdout" {
			n := len(ev["data"].(string))
			if ev["encoding"] == "base64" {
				b, _ := base64.StdEncoding.DecodeString(ev["data"].(string))
				n = len(b)
			}
			if n > 64<<10 {
				t.Fatalf("chunk of %d source bytes; want <= 64 KiB", n)
			}
		}
	}
	out := a.exec(obj{"command": "cat rand.bin"})
	got, err := base64.StdEncoding.DecodeString(out["stdout"].(string))
	if out["encoding"] != "base64" || err != nil || !bytes.Equal(got, data) {
		t.Fatalf("buffered binary output differs (encoding %v, err %v)", out["encoding"], err)
	}
	// /dev/urandom directly, as in the brief.
	evs = a.stream("/api/execute/stream", obj{"command": "head -c 1000 /dev/urandom | tee out.bin"})
	want, err := os.ReadFile(filepath.Join(a.workdir, "out.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if got := outputOf(t, evs, "stdout"); !bytes.Equal(got, want) || len(got) != 1000 {
		t.Fatalf("urandom round trip: %d bytes, equal %v", len(got), bytes.Equal(got, want))
	}
}

func TestExecUTF8NeverSplit(t *testing.T) {
	a := startAgent(t)
	text := strings.Repeat("é€😀a", 40_000) // 10 bytes per repeat, 400 kB: chunk edges fall inside characters
	if err := os.WriteFile(filepath.Join(a.workdir, "u.txt"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	evs := a.stream("/api/execute/stream", obj{"command": "cat u.txt"})
	n := 0
	for _, ev := range evs {
		if ev["type"] != "stdout" {
			continue
		}
		n++
		if ev["encoding"] != nil {
			t.Fatalf("chunk %d sent as %v; want text", n, ev["encoding"])
		}
		if !utf8.ValidString(ev["data"].(string)) {
			t.Fatalf("chunk %d is not valid UTF-8", n)
		}
	}
	if got := string(outputOf(t, evs, "stdout")); got != text {
		t.Fatalf("reassembled text differs (%d bytes, want %d)", len(got), len(text))
	}
	if n < 2 {
		t.Fatalf("only %d chunks; the test needs several", n)
	}
}

func TestExecStderrInvalidUTF8(t *testing.T) {
	a := startAgent(t)
	evs := a.stream("/api/execute/stream", obj{"command": `printf 'ok\n'; printf '\xff\xfe' >&2`})
	if got := outputOf(t, evs, "stderr"); !bytes.Equal(got, []byte{0xff, 0xfe}) {
		t.Fatalf("stderr = %q", got)
	}
	out := a.exec(obj{"command": `printf 'ok\n'; printf '\xff\xfe' >&2`})
	if out["encoding"] != "base64" || out["stdout"] != base64.StdEncoding.EncodeToString([]byte("ok\n")) {
		t.Fatalf("buffered = %v; want both base64", out)
	}
}

func TestExecBackgroundDoesNotBlock(t *testing.T) {
	a := startAgent(t)
	mark := randomMark()
	start := time.Now()
	out := a.exec(obj{"command": "sleep 300 & echo bg", "env": obj{"TESTMARK": mark}})
	if out["stdout"] != "bg\n" {
		t.Fatalf("exec = %v", out)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("background child held the exec for %v", d)
	}
	pids := session.FindMarked("TESTMARK", mark)
	for _, pid := range pids {
		p, _ := os.FindProcess(pid)
		_ = p.Kill()
	}
	waitNoMarked(t, mark)
}

func TestExecMethodStreamErrorsBeforeStart(t *testing.T) {
	a := startAgent(t)
	resp := a.openStream(context.Background(), "/api/execute/stream", obj{"command": "true", "sessionId": "bad id!"})
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("bad session id = %d; want 400", resp.StatusCode)
	}
}
