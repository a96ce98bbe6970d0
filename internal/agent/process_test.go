package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hutchdev/hutch/internal/agent/session"
	"github.com/hutchdev/hutch/internal/testutil"
)

// procAgent is a test agent whose Config the test chooses, with a stop function.
type procAgent struct {
	*testAgent
	stop func() // shuts the server down (idempotent)
}

// startAgentWith serves an agent with cfg (Workdir, StateDir, Env, Logger filled in when
// empty) and stops it at cleanup.
func startAgentWith(t *testing.T, cfg Config) *procAgent {
	t.Helper()
	base := t.TempDir()
	sockDir, err := os.MkdirTemp("", "hproc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "a.sock")
	if cfg.Workdir == "" {
		cfg.Workdir = filepath.Join(base, "workspace")
	}
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(base, "state")
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		tr.CloseIdleConnections()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return after cancel")
		}
	}
	t.Cleanup(stop)
	return &procAgent{testAgent: &testAgent{t: t, workdir: cfg.Workdir, client: &http.Client{Transport: tr}}, stop: stop}
}

// buildShimArgv builds hutch-init and returns its shim argv prefix.
func buildShimArgv(t *testing.T) []string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hutch-init")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/hutchdev/hutch/cmd/hutch-init")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("cannot build hutch-init: %v\n%s", err, out)
	}
	return []string{bin, "shim", "--fds", "2", "--"}
}

// startProc starts a process and returns the start reply.
func (a *testAgent) startProc(body obj) obj {
	a.t.Helper()
	return a.mustPost("/api/process/start", body)
}

// waitProcExit waits for the process's end and returns the wait-exit reply.
func (a *testAgent) waitProcExit(id string) obj {
	a.t.Helper()
	return a.mustPost("/api/process/"+id+"/wait-exit", obj{"timeoutMs": 60000})
}

// getProc returns the process object of id.
func (a *testAgent) getProc(id string) obj {
	a.t.Helper()
	status, out := a.do(http.MethodGet, "/api/process/"+id, nil)
	if status != 200 {
		a.t.Fatalf("GET process %s = %d %v", id, status, out)
	}
	return out["process"].(obj)
}

func TestProcessStartListGetAndStatuses(t *testing.T) {
	a := startAgent(t)
	tests := []struct {
		cmd    string
		code   float64
		status string
	}{
		{"echo ok", 0, "completed"},
		{"exit 3", 3, "failed"},
		{"kill -TERM $$", 143, "killed"},
	}
	var ids []string
	for _, tt := range tests {
		out := a.startProc(obj{"command": tt.cmd})
		id := out["processId"].(string)
		p := out["process"].(obj)
		if !strings.HasPrefix(id, "proc_") || out["pid"].(float64) <= 0 || out["command"] != tt.cmd ||
			p["id"] != id || p["sessionId"] != "default" || p["cwd"] != a.workdir || p["startTime"] == nil {
			t.Fatalf("start = %v", out)
		}
		ids = append(ids, id)
		ex := a.waitProcExit(id)
		if ex["exitCode"] != tt.code || ex["status"] != tt.status || ex["processId"] != id {
			t.Fatalf("%q: wait-exit = %v; want %v %s", tt.cmd, ex, tt.code, tt.status)
		}
		p = a.getProc(id)
		if p["status"] != tt.status || p["exitCode"] != tt.code || p["endTime"] == nil {
			t.Fatalf("%q: process = %v", tt.cmd, p)
		}
		if _, err := time.Parse(time.RFC3339Nano, p["endTime"].(string)); err != nil {
			t.Fatal(err)
		}
	}
	out := a.startProc(obj{"command": "sleep 300", "processId": "server.1"})
	if p := out["process"].(obj); p["status"] != "running" || p["exitCode"] != nil {
		t.Fatalf("running process = %v", p)
	}
	ids = append(ids, "server.1")
	_, list := a.do(http.MethodGet, "/api/process/list", nil)
	procs := list["processes"].([]any)
	if len(procs) != 4 {
		t.Fatalf("list = %v", list)
	}
	for i, p := range procs {
		if p.(obj)["id"] != ids[i] {
			t.Fatalf("list order: %v; want %v", procs, ids)
		}
	}
	_, list = a.do(http.MethodGet, "/api/process/list?status=running", nil)
	if procs := list["processes"].([]any); len(procs) != 1 || procs[0].(obj)["id"] != "server.1" {
		t.Fatalf("list running = %v", list)
	}

	status, e := a.post("/api/process/start", obj{"command": "true", "processId": "server.1"})
	wantError(t, status, e, 409, "PROCESS_ALREADY_EXISTS")
	status, e = a.post("/api/process/start", obj{"command": "true", "processId": ids[0]})
	wantError(t, status, e, 409, "PROCESS_ALREADY_EXISTS") // retained
	for _, bad := range []string{"kill-all", "a b", "..", strings.Repeat("x", 129)} {
		status, e = a.post("/api/process/start", obj{"command": "true", "processId": bad})
		wantError(t, status, e, 400, "VALIDATION_FAILED")
	}
	status, e = a.post("/api/process/start", obj{"command": " "})
	wantError(t, status, e, 400, "INVALID_COMMAND")
	for _, size := range []int{1000, 512 << 20} {
		status, e = a.post("/api/process/start", obj{"command": "true", "logBufferBytes": size})
		wantError(t, status, e, 400, "VALIDATION_FAILED")
	}
	status, e = a.do(http.MethodGet, "/api/process/nope", nil)
	wantError(t, status, e, 404, "PROCESS_NOT_FOUND")
	if e["operation"] != "process.get" {
		t.Fatalf("operation = %v", e["operation"])
	}
	for _, path := range []string{"/api/process/nope/logs", "/api/process/nope/stream"} {
		status, e = a.do(http.MethodGet, path, nil)
		wantError(t, status, e, 404, "PROCESS_NOT_FOUND")
	}
	status, e = a.post("/api/process/nope/wait-exit", obj{})
	wantError(t, status, e, 404, "PROCESS_NOT_FOUND")
	status, e = a.do(http.MethodDelete, "/api/process/nope", nil)
	wantError(t, status, e, 404, "PROCESS_NOT_FOUND")
	status, e = a.do(http.MethodGet, "/api/process/x/nope", nil)
	wantError(t, status, e, 404, "NOT_FOUND")
	status, e = a.do(http.MethodPost, "/api/process/list", nil)
	wantError(t, status, e, 405, "METHOD_NOT_ALLOWED")
	status, e = a.do(http.MethodGet, "/api/process/list?status=weird", nil)
	wantError(t, status, e, 400, "VALIDATION_FAILED")
	status, e = a.do(http.MethodDelete, "/api/process/server.1?graceMs=70000", nil)
	wantError(t, status, e, 400, "VALIDATION_FAILED")

	status, out = a.do(http.MethodDelete, "/api/process/server.1?graceMs=2000", nil)
	p := out["process"].(obj)
	if status != 200 || out["killed"] != true || p["status"] != "killed" || p["exitCode"] != 143.0 {
		t.Fatalf("kill = %d %v", status, out)
	}
	status, out = a.do(http.MethodDelete, "/api/process/server.1", nil)
	if status != 200 || out["killed"] != false {
		t.Fatalf("second kill = %d %v", status, out)
	}
}

// Kill ends the whole tree: children, and (under the shim) setsid'd and orphaned
// grandchildren; one that ignores SIGTERM gets SIGKILL after the grace.
func TestProcessKillTree(t *testing.T) {
	shim := buildShimArgv(t)
	a := startAgentWith(t, Config{Shim: shim})
	tests := []struct {
		name, cmd string
		sleeps    int
		grace     int
		codes     []float64
	}{
		{"children", "sh -c 'sleep 300 & sleep 300 & wait'", 2, 5000, []float64{143}},
		{"setsid grandchild", "sh -c 'setsid sleep 300 & exit 0'; setsid sleep 300 & wait", 2, 5000, []float64{143}},
		{"ignores TERM", `trap "" TERM; sleep 300`, 1, 200, []float64{137}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mark := randomMark()
			id := a.startProc(obj{"command": tt.cmd, "env": obj{"TESTMARK": mark}})["processId"].(string)
			testutil.Poll(t, 10*time.Millisecond, 10*time.Second, func() bool { return len(sleepsMarked(mark)) >= tt.sleeps })
			if n := len(sleepsMarked(mark)); n != tt.sleeps {
				t.Fatalf("%d sleeps running; want %d", n, tt.sleeps)
			}
			status, out := a.do(http.MethodDelete, fmt.Sprintf("/api/process/%s?graceMs=%d", id, tt.grace), nil)
			p := out["process"].(obj)
			if status != 200 || out["killed"] != true || p["status"] != "killed" || !containsFloat(tt.codes, p["exitCode"]) {
				t.Fatalf("kill = %d %v; want exit code in %v", status, out, tt.codes)
			}
			if pids := session.FindMarked("TESTMARK", mark); len(pids) != 0 {
				t.Fatalf("processes survived: %v", pids)
			}
		})
	}

	var marks []string
	for range 3 {
		mark := randomMark()
		marks = append(marks, mark)
		a.startProc(obj{"command": "sleep 300 & wait", "env": obj{"TESTMARK": mark}})
	}
	status, out := a.do(http.MethodDelete, "/api/process/kill-all?graceMs=1000", nil)
	if status != 200 || out["cleanedCount"] != 3.0 {
		t.Fatalf("kill-all = %d %v", status, out)
	}
	for _, m := range marks {
		waitNoMarked(t, m)
	}
	_, list := a.do(http.MethodGet, "/api/process/list?status=running", nil)
	if n := len(list["processes"].([]any)); n != 0 {
		t.Fatalf("%d processes still running", n)
	}
}

func containsFloat(s []float64, v any) bool {
	for _, x := range s {
		if v == x {
			return true
		}
	}
	return false
}

// sleepsMarked returns the live `sleep` processes carrying TESTMARK=mark.
func sleepsMarked(mark string) []int {
	var out []int
	for _, pid := range session.FindMarked("TESTMARK", mark) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(b)) == "sleep" {
			out = append(out, pid)
		}
	}
	return out
}

func TestProcessLogs(t *testing.T) {
	a := startAgent(t)
	id := a.startProc(obj{"command": "echo out1; echo err1 >&2; printf 'out2 ✓'; printf 'err2' >&2"})["processId"].(string)
	a.waitProcExit(id)
	status, l := a.do(http.MethodGet, "/api/process/"+id+"/logs", nil)
	if status != 200 || l["stdout"] != "out1\nout2 ✓" || l["stderr"] != "err1\nerr2" || l["encoding"] != nil ||
		l["stdoutOffset"] != 0.0 || l["stdoutEnd"] != float64(len("out1\nout2 ✓")) || l["stdoutDropped"] != 0.0 ||
		l["stderrEnd"] != 9.0 || l["status"] != "completed" || l["exitCode"] != 0.0 {
		t.Fatalf("logs = %d %v", status, l)
	}
	id = a.startProc(obj{"command": `printf 'a\377b'; echo fine >&2`})["processId"].(string)
	a.waitProcExit(id)
	_, l = a.do(http.MethodGet, "/api/process/"+id+"/logs", nil)
	if l["encoding"] != "base64" || l["stdout"] != base64.StdEncoding.EncodeToString([]byte("a\xffb")) ||
		l["stderr"] != base64.StdEncoding.EncodeToString([]byte("fine\n")) {
		t.Fatalf("binary logs = %v", l)
	}
}

// 50 MiB through a 1 MiB buffer: the held part is the last MiB, the rest is reported dropped.
func TestProcessBigOutputBounded(t *testing.T) {
	a := startAgent(t)
	const total, buf = 50 << 20, 1 << 20
	id := a.startProc(obj{
		"command":        fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x; echo done >&2", total),
		"logBufferBytes": buf,
	})["processId"].(string)
	a.waitProcExit(id)
	_, l := a.do(http.MethodGet, "/api/process/"+id+"/logs", nil)
	marker := fmt.Sprintf("[hutch: %d earlier bytes of stdout were dropped (log buffer %d bytes)]\n", total-buf, buf)
	stdout := l["stdout"].(string)
	if !strings.HasPrefix(stdout, marker) || len(stdout) != len(marker)+buf || strings.Trim(stdout[len(marker):], "x") != "" {
		t.Fatalf("stdout: %d bytes, starts %q", len(stdout), stdout[:min(len(stdout), 100)])
	}
	if l["stdoutOffset"] != float64(total-buf) || l["stdoutDropped"] != float64(total-buf) || l["stdoutEnd"] != float64(total) ||
		l["stderr"] != "done\n" || l["stderrDropped"] != 0.0 {
		t.Fatalf("logs offsets = %v %v %v %v", l["stdoutOffset"], l["stdoutDropped"], l["stdoutEnd"], l["stderr"])
	}
	frames := a.processStream(context.Background(), id, "", 0)
	if frames[0].ev["type"] != "process_info" || frames[1].ev["type"] != "dropped" || frames[1].ev["stream"] != "stdout" ||
		frames[1].ev["from"] != 0.0 || frames[1].ev["to"] != float64(total-buf) {
		t.Fatalf("stream starts %v %v", frames[0].ev, frames[1].ev)
	}
	got, _ := streamBytes(t, frames)
	if len(got) != buf {
		t.Fatalf("streamed %d stdout bytes; want %d", len(got), buf)
	}
}

// frame is one SSE frame with its id line.
type frame struct {
	id string
	ev event
}

// processStream reads GET /api/process/{id}/stream (query and Last-Event-ID as given) until
// it ends, or until max output frames were read (0 = no limit), and returns the frames.
func (a *testAgent) processStream(ctx context.Context, id, query string, max int, header ...string) []frame {
	a.t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/api/process/"+id+"/stream"+query, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	if len(header) == 2 {
		req.Header.Set(header[0], header[1])
	}
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		a.t.Fatalf("stream = %d %s", resp.StatusCode, b)
	}
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	var frames []frame
	var cur frame
	outputs := 0
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			return frames
		}
		if err != nil {
			a.t.Fatalf("read stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &cur.ev); err != nil {
				a.t.Fatalf("frame %q: %v", line, err)
			}
		case line == "":
			frames = append(frames, cur)
			if t := cur.ev["type"]; t == "stdout" || t == "stderr" {
				outputs++
			}
			cur = frame{}
			if max > 0 && outputs == max {
				return frames
			}
		}
	}
}

// streamBytes reassembles stdout and stderr from frames, checking that each chunk's offset
// follows the previous one and that its id gives the next offsets.
func streamBytes(t *testing.T, frames []frame) (stdout, stderr []byte) {
	t.Helper()
	next := map[string]int64{}
	first := map[string]bool{"stdout": true, "stderr": true}
	for _, f := range frames {
		typ, _ := f.ev["type"].(string)
		if typ == "dropped" {
			next[f.ev["stream"].(string)] = int64(f.ev["to"].(float64))
			first[f.ev["stream"].(string)] = false
			continue
		}
		if typ != "stdout" && typ != "stderr" {
			continue
		}
		data := []byte(f.ev["data"].(string))
		if f.ev["encoding"] == "base64" {
			var err error
			if data, err = base64.StdEncoding.DecodeString(string(data)); err != nil {
				t.Fatal(err)
			}
		} else if !utf8.Valid(data) {
			t.Fatalf("text chunk is not UTF-8")
		}
		if len(data) > 64<<10 {
			t.Fatalf("chunk of %d bytes", len(data))
		}
		off := int64(f.ev["offset"].(float64))
		if !first[typ] && off != next[typ] {
			t.Fatalf("%s chunk at %d; want %d", typ, off, next[typ])
		}
		first[typ] = false
		next[typ] = off + int64(len(data))
		so, se, _ := strings.Cut(f.id, ",")
		if want := strconv.FormatInt(next["stdout"], 10); typ == "stdout" && so != want {
			t.Fatalf("id %q after stdout up to %s", f.id, want)
		}
		if want := strconv.FormatInt(next["stderr"], 10); typ == "stderr" && se != want {
			t.Fatalf("id %q after stderr up to %s", f.id, want)
		}
		if typ == "stdout" {
			stdout = append(stdout, data...)
		} else {
			stderr = append(stderr, data...)
		}
	}
	return stdout, stderr
}

// A stream cut part way and resumed with its offsets gives exactly the full output.
func TestProcessStreamResume(t *testing.T) {
	a := startAgent(t)
	const n = 3000
	id := a.startProc(obj{"command": fmt.Sprintf(
		`for i in $(seq 1 %d); do echo "línea $i ✓"; echo "err $i" >&2; if [ $((i %% 500)) = 0 ]; then sleep 0.05; fi; done`, n)})["processId"].(string)
	var wantOut, wantErr bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&wantOut, "línea %d ✓\n", i)
		fmt.Fprintf(&wantErr, "err %d\n", i)
	}
	for _, how := range []string{"query", "Last-Event-ID"} {
		t.Run(how, func(t *testing.T) {
			var out, errOut []byte
			last := ""
			for round := 0; ; round++ {
				if round > 10000 {
					t.Fatal("stream never ended")
				}
				var frames []frame
				switch {
				case last == "":
					frames = a.processStream(context.Background(), id, "", 3)
				case how == "query":
					so, se, _ := strings.Cut(last, ",")
					frames = a.processStream(context.Background(), id, "?stdoutOffset="+so+"&stderrOffset="+se, 3)
				default:
					frames = a.processStream(context.Background(), id, "", 3, "Last-Event-ID", last)
				}
				if frames[0].ev["type"] != "process_info" || frames[0].ev["command"] == nil {
					t.Fatalf("first frame %v", frames[0].ev)
				}
				o, e := streamBytes(t, frames)
				out, errOut = append(out, o...), append(errOut, e...)
				ended := false
				for _, f := range frames {
					if f.id != "" {
						last = f.id
					}
					if f.ev["type"] == "dropped" {
						t.Fatalf("unexpected drop %v", f.ev)
					}
					if f.ev["type"] == "exit" {
						ended = true
						if f.ev["exitCode"] != 0.0 || f.ev["status"] != "completed" || f.ev["data"] != "Process completed with exit code 0" {
							t.Fatalf("exit frame %v", f.ev)
						}
					}
				}
				if ended {
					break
				}
			}
			if !bytes.Equal(out, wantOut.Bytes()) || !bytes.Equal(errOut, wantErr.Bytes()) {
				t.Fatalf("resumed output differs: %d/%d stdout bytes, %d/%d stderr bytes",
					len(out), wantOut.Len(), len(errOut), wantErr.Len())
			}
		})
	}
	status, e := a.do(http.MethodGet, "/api/process/"+id+"/stream?stdoutOffset=-1", nil)
	wantError(t, status, e, 400, "VALIDATION_FAILED")
	status, e = a.do(http.MethodGet, "/api/process/"+id+"/stream?stdoutOffset=99999999", nil)
	wantError(t, status, e, 400, "VALIDATION_FAILED")
}

// A live stream gets the output as it comes, then the exit.
func TestProcessStreamLive(t *testing.T) {
	a := startAgent(t)
	id := a.startProc(obj{"command": "echo one; sleep 0.3; echo two >&2; sleep 0.3; exit 4"})["processId"].(string)
	frames := a.processStream(context.Background(), id, "", 0)
	var types []string
	for _, f := range frames {
		types = append(types, f.ev["type"].(string))
	}
	if got := strings.Join(types, ","); got != "process_info,stdout,stderr,exit" {
		t.Fatalf("frames = %s (%v)", got, frames)
	}
	if frames[1].ev["data"] != "one\n" || frames[1].id != "4,0" || frames[2].ev["data"] != "two\n" || frames[2].id != "4,4" ||
		frames[3].ev["exitCode"] != 4.0 || frames[3].ev["status"] != "failed" || frames[3].ev["processId"] != id {
		t.Fatalf("frames = %v", frames)
	}
}

func TestProcessWaitLog(t *testing.T) {
	a := startAgent(t)
	id := a.startProc(obj{"command": `echo "booting"; printf '\033[32mlistening on port 8080\033[0m\r\n'; sleep 0.5; echo "ready later" >&2; sleep 300`})["processId"].(string)
	defer a.do(http.MethodDelete, "/api/process/"+id+"?graceMs=0", nil)
	// Held output: wait until the line is in the logs, then wait for it.
	if !testutil.Poll(t, 10*time.Millisecond, 10*time.Second, func() bool {
		_, l := a.do(http.MethodGet, "/api/process/"+id+"/logs", nil)
		return strings.Contains(l["stdout"].(string), "8080")
	}) {
		t.Fatal("output never came")
	}
	out := a.mustPost("/api/process/"+id+"/wait-log", obj{"pattern": `^listening on port (?P<port>\d+)$`})
	match := out["match"].([]any)
	if out["line"] != "listening on port 8080" || len(match) != 2 || match[1] != "8080" ||
		out["groups"].(obj)["port"] != "8080" || out["stream"] != "stdout" {
		t.Fatalf("wait-log = %v", out)
	}
	out = a.mustPost("/api/process/"+id+"/wait-log", obj{"text": "ready later", "timeoutMs": 20000})
	if out["line"] != "ready later" || out["stream"] != "stderr" || out["match"].([]any)[0] != "ready later" || out["groups"] != nil {
		t.Fatalf("wait-log later = %v", out)
	}
	status, e := a.post("/api/process/"+id+"/wait-log", obj{"text": "ready later", "stream": "stdout", "timeoutMs": 300})
	wantError(t, status, e, 408, "PROCESS_READY_TIMEOUT")
	if e["context"].(obj)["timeoutMs"] != 300.0 {
		t.Fatalf("timeout context = %v", e["context"])
	}
	status, e = a.post("/api/process/"+id+"/wait-log", obj{"pattern": "(unclosed"})
	wantError(t, status, e, 400, "INVALID_PATTERN")
	status, e = a.post("/api/process/"+id+"/wait-log", obj{"pattern": "a", "text": "a"})
	wantError(t, status, e, 400, "VALIDATION_FAILED")
	status, e = a.post("/api/process/"+id+"/wait-log", obj{})
	wantError(t, status, e, 400, "VALIDATION_FAILED")

	// The process ends first: the waiter fails at once, with the exit code.
	id2 := a.startProc(obj{"command": "echo nothing; sleep 0.3; exit 5"})["processId"].(string)
	status, e = a.post("/api/process/"+id2+"/wait-log", obj{"text": "never"})
	wantError(t, status, e, 409, "PROCESS_EXITED_BEFORE_READY")
	if c := e["context"].(obj); c["exitCode"] != 5.0 || c["status"] != "failed" || c["processId"] != id2 {
		t.Fatalf("context = %v", c)
	}
	// The final line without a newline counts once the process has ended.
	id3 := a.startProc(obj{"command": "printf 'no newline here'"})["processId"].(string)
	out = a.mustPost("/api/process/"+id3+"/wait-log", obj{"pattern": "newline (here)$"})
	if out["line"] != "no newline here" || out["match"].([]any)[1] != "here" {
		t.Fatalf("final line = %v", out)
	}
}

// freePort returns a TCP port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestProcessWaitPort(t *testing.T) {
	requirePython(t)
	a := startAgent(t)
	port := freePort(t)
	id := a.startProc(obj{"command": fmt.Sprintf("sleep 0.3; exec python3 -m http.server %d --bind 127.0.0.1", port)})["processId"].(string)
	defer a.do(http.MethodDelete, "/api/process/"+id+"?graceMs=1000", nil)
	out := a.mustPost("/api/process/"+id+"/wait-port", obj{"port": port, "intervalMs": 50, "timeoutMs": 30000})
	if out["port"] != float64(port) || out["statusCode"] != 200.0 {
		t.Fatalf("wait-port http = %v", out)
	}
	out = a.mustPost("/api/process/"+id+"/wait-port", obj{"port": port, "mode": "tcp", "timeoutMs": 30000})
	if out["port"] != float64(port) || out["statusCode"] != nil {
		t.Fatalf("wait-port tcp = %v", out)
	}
	// A status range the server does not answer with: a timeout.
	status, e := a.post("/api/process/"+id+"/wait-port", obj{"port": port, "path": "/missing", "timeoutMs": 400})
	wantError(t, status, e, 408, "PROCESS_READY_TIMEOUT")
	out = a.mustPost("/api/process/"+id+"/wait-port", obj{"port": port, "path": "/missing", "status": obj{"min": 404, "max": 404}})
	if out["statusCode"] != 404.0 {
		t.Fatalf("wait-port 404 = %v", out)
	}
	for _, p := range []int{0, 70000} {
		status, e = a.post("/api/process/"+id+"/wait-port", obj{"port": p})
		wantError(t, status, e, 400, "INVALID_PORT")
	}
	status, e = a.post("/api/process/"+id+"/wait-port", obj{"port": port, "mode": "udp"})
	wantError(t, status, e, 400, "VALIDATION_FAILED")
}

func TestProcessWaitPortExitsFirst(t *testing.T) {
	a := startAgent(t)
	id := a.startProc(obj{"command": "sleep 0.3; exit 2"})["processId"].(string)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// No timeout: only the exit can end this wait.
		status, e := a.post("/api/process/"+id+"/wait-port", obj{"port": freePort(t), "mode": "tcp"})
		wantError(t, status, e, 409, "PROCESS_EXITED_BEFORE_READY")
		if e["context"].(obj)["exitCode"] != 2.0 {
			t.Errorf("context = %v", e["context"])
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("wait-port did not fail when the process ended")
	}
	// Already ended: at once.
	status, e := a.post("/api/process/"+id+"/wait-port", obj{"port": freePort(t)})
	wantError(t, status, e, 409, "PROCESS_EXITED_BEFORE_READY")
}

func TestProcessWaitExitTimeout(t *testing.T) {
	a := startAgent(t)
	id := a.startProc(obj{"command": "sleep 300"})["processId"].(string)
	status, e := a.post("/api/process/"+id+"/wait-exit", obj{"timeoutMs": 200})
	wantError(t, status, e, 408, "PROCESS_READY_TIMEOUT")
	a.do(http.MethodDelete, "/api/process/"+id+"?graceMs=0", nil)
	out := a.waitProcExit(id)
	if out["status"] != "killed" {
		t.Fatalf("wait-exit = %v", out)
	}
}

// Records survive a new agent on the same process dir; processes running at shutdown are
// terminated and recorded as such.
func TestProcessPersistence(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "processes")
	a := startAgentWith(t, Config{ProcessDir: dir})
	id := a.startProc(obj{"command": "echo kept; echo kept-err >&2; exit 6", "processId": "job"})["processId"].(string)
	a.waitProcExit(id)
	a.startProc(obj{"command": "sleep 300", "processId": "srv"})
	a.stop()
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("process dir: %v %v", fi, err)
	}
	for _, f := range []string{"job.json", "job.stdout", "job.stderr", "srv.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("file %s: %v", f, err)
		}
	}

	b := startAgentWith(t, Config{ProcessDir: dir})
	p := b.getProc("job")
	if p["status"] != "failed" || p["exitCode"] != 6.0 || p["command"] != "echo kept; echo kept-err >&2; exit 6" {
		t.Fatalf("reloaded = %v", p)
	}
	_, l := b.do(http.MethodGet, "/api/process/job/logs", nil)
	if l["stdout"] != "kept\n" || l["stderr"] != "kept-err\n" {
		t.Fatalf("reloaded logs = %v", l)
	}
	if p := b.getProc("srv"); p["status"] != "killed" || p["exitCode"] != 143.0 {
		t.Fatalf("process running at shutdown = %v", p)
	}
	o, e := streamBytes(t, b.processStream(context.Background(), "job", "", 0))
	if string(o) != "kept\n" || string(e) != "kept-err\n" {
		t.Fatalf("reloaded stream %q %q", o, e)
	}
}

func TestProcessRetention(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "processes")
	a := startAgentWith(t, Config{ProcessDir: dir, ProcessRetention: 300 * time.Millisecond})
	id := a.startProc(obj{"command": "true"})["processId"].(string)
	a.waitProcExit(id)
	if !testutil.Poll(t, 50*time.Millisecond, 10*time.Second, func() bool {
		status, _ := a.do(http.MethodGet, "/api/process/"+id, nil)
		return status == 404
	}) {
		t.Fatal("finished process never expired")
	}
	if _, err := os.Stat(filepath.Join(dir, id+".json")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("record file after expiry: %v", err)
	}
	// An expired ID can be used again.
	a.startProc(obj{"command": "true", "processId": id})
}

// A background process holds no session lock and leaves the session's state alone.
func TestProcessSessionIndependence(t *testing.T) {
	a := startAgent(t)
	if err := os.Mkdir(filepath.Join(a.workdir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	a.exec(obj{"command": "export SESS=1; cd sub", "sessionId": "s1"})
	id := a.startProc(obj{"command": `echo "$SESS $PER $PWD"; cd /; export SESS=2; sleep 300`, "sessionId": "s1", "env": obj{"PER": "x"}})["processId"].(string)
	defer a.do(http.MethodDelete, "/api/process/"+id+"?graceMs=0", nil)
	if p := a.getProc(id); p["sessionId"] != "s1" || p["cwd"] != filepath.Join(a.workdir, "sub") {
		t.Fatalf("process = %v", p)
	}
	a.mustPost("/api/process/"+id+"/wait-log", obj{"text": "1 x " + filepath.Join(a.workdir, "sub"), "timeoutMs": 20000})
	done := make(chan obj, 1)
	go func() { done <- a.exec(obj{"command": `echo "$SESS ${PER-unset} $PWD"`, "sessionId": "s1"}) }()
	select {
	case out := <-done:
		if want := "1 unset " + filepath.Join(a.workdir, "sub") + "\n"; out["stdout"] != want {
			t.Fatalf("foreground = %q; want %q", out["stdout"], want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a foreground exec waited for the background process")
	}
	// Per-process cwd, relative to the session's.
	id2 := a.startProc(obj{"command": "pwd", "sessionId": "s1", "cwd": ".."})["processId"].(string)
	a.waitProcExit(id2)
	if _, l := a.do(http.MethodGet, "/api/process/"+id2+"/logs", nil); l["stdout"] != a.workdir+"\n" {
		t.Fatalf("cwd override: %v", l["stdout"])
	}
}

// Chunks of a stream never split a UTF-8 character, even at the 64 KiB chunk bound.
func TestProcessStreamUTF8(t *testing.T) {
	a := startAgent(t)
	const n = 100000
	id := a.startProc(obj{"command": fmt.Sprintf("printf '✓%%.0s' $(seq 1 %d)", n)})["processId"].(string)
	a.waitProcExit(id)
	frames := a.processStream(context.Background(), id, "", 0)
	chunks := 0
	for _, f := range frames {
		if f.ev["type"] == "stdout" {
			chunks++
			if f.ev["encoding"] != nil {
				t.Fatalf("chunk at %v sent %v", f.ev["offset"], f.ev["encoding"])
			}
		}
	}
	out, _ := streamBytes(t, frames)
	if chunks < 5 || string(out) != strings.Repeat("✓", n) {
		t.Fatalf("%d chunks, %d bytes", chunks, len(out))
	}
}
