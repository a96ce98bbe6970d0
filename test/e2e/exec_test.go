package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

// TestExecAcceptance runs acceptance cases E1–E6 (shared/acceptance/cases.md) through hutchd.
func TestExecAcceptance(t *testing.T) {
	requireEnv(t)
	parallel(t)
	sb := sandbox(t, "e2e-exec", nil)

	t.Run("E1 buffered", func(t *testing.T) {
		res, err := sb.Exec(ctxT(t, time.Minute), `sh -c 'echo out; echo err >&2; exit 3'`, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.ExitCode != 3 {
			t.Fatalf("Exec = stdout %q, stderr %q, exit %d; want \"out\\n\", \"err\\n\", 3", res.Stdout, res.Stderr, res.ExitCode)
		}
	})
	t.Run("E1 streamed order", func(t *testing.T) {
		var types []string
		exit := -1
		for ev, err := range sb.ExecStream(ctxT(t, time.Minute), `sh -c 'echo out; echo err >&2; exit 3'`, nil) {
			if err != nil {
				t.Fatal(err)
			}
			switch ev.Type {
			case client.ExecEventStdout, client.ExecEventStderr:
				types = append(types, ev.Type+":"+string(ev.Data))
			case client.ExecEventComplete:
				exit = ev.ExitCode
			}
		}
		want := []string{"stdout:out\n", "stderr:err\n"}
		if strings.Join(types, "|") != strings.Join(want, "|") || exit != 3 {
			t.Fatalf("stream = %q, exit %d; want %q, 3", types, exit, want)
		}
	})
	t.Run("E2 timeout kills", func(t *testing.T) {
		start := time.Now()
		_, err := sb.Exec(ctxT(t, time.Minute), "sleep 30", &client.ExecOptions{Timeout: time.Second})
		if !errdefs.IsCode(err, errdefs.CodeCommandTimeout) || !errors.Is(err, errdefs.ErrDeadlineExceeded) {
			t.Fatalf("Exec(sleep 30, 1s) err = %v; want COMMAND_TIMEOUT", err)
		}
		if el := time.Since(start); el > 15*time.Second {
			t.Fatalf("timeout took %s; the command was not stopped", el)
		}
		assertNoProcess(t, sb, "sleep 30")
	})
	t.Run("E3 tree killed", func(t *testing.T) {
		_, err := sb.Exec(ctxT(t, time.Minute), `sh -c 'sleep 300 & sleep 300 & setsid sleep 300 & setsid env -i sleep 301 & sh -c "setsid env -i sleep 302 &"; wait'`, &client.ExecOptions{Timeout: time.Second})
		if !errdefs.IsCode(err, errdefs.CodeCommandTimeout) {
			t.Fatalf("err = %v; want COMMAND_TIMEOUT", err)
		}
		assertNoProcess(t, sb, "sleep 30")
	})
	t.Run("E4 first byte early", func(t *testing.T) {
		start := time.Now()
		var first, end time.Duration
		for ev, err := range sb.ExecStream(ctxT(t, time.Minute), `python3 -c 'import time; print(1, flush=True); time.sleep(3); print(2)'`, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == client.ExecEventStdout && first == 0 {
				first = time.Since(start)
			}
			if ev.Type == client.ExecEventComplete {
				end = time.Since(start)
			}
		}
		if first == 0 || end == 0 || end-first < 2*time.Second {
			t.Fatalf("first stdout at %s, complete at %s: the first line did not arrive before the sleep", first, end)
		}
		t.Logf("time to first byte %s, total %s", first, end)
	})
	t.Run("E5 stdin", func(t *testing.T) {
		res, err := sb.Exec(ctxT(t, 30*time.Second), `python3 -c 'print(input())'`, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode == 0 || !bytes.Contains(res.Stderr, []byte("EOFError")) {
			t.Fatalf("without stdin: exit %d stderr %q; want a fast EOF failure", res.ExitCode, res.Stderr)
		}
		res, err = sb.Exec(ctxT(t, 30*time.Second), `python3 -c 'print(input())'`, &client.ExecOptions{Stdin: []byte("50\n")})
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Stdout) != "50\n" || res.ExitCode != 0 {
			t.Fatalf("with stdin: stdout %q exit %d; want \"50\\n\", 0", res.Stdout, res.ExitCode)
		}
	})
	t.Run("E6 cut stream is an error", func(t *testing.T) {
		// A proxy between the SDK and hutchd cuts the connection after the first output.
		cut := newCuttingProxy(t, d.Listen, []byte("tick"))
		c, err := client.New("http://"+cut, d.Token)
		if err != nil {
			t.Fatal(err)
		}
		var sawErr error
		clean := false
		for ev, err := range c.SandboxHandle("e2e-exec").ExecStream(ctxT(t, time.Minute), `for i in 1 2 3 4 5 6 7 8 9 10; do echo tick; sleep 0.5; done`, nil) {
			if err != nil {
				sawErr = err
				break
			}
			if ev.Type == client.ExecEventComplete {
				clean = true
			}
		}
		if clean || sawErr == nil || !errdefs.IsCode(sawErr, errdefs.CodeStreamIncomplete) {
			t.Fatalf("cut stream: clean=%v err=%v; want STREAM_INCOMPLETE", clean, sawErr)
		}
		// The command's tree is gone once its stream is cut.
		assertNoProcessEventually(t, sb, "sleep 0.5")
	})
	t.Run("sessions isolated and persistent", func(t *testing.T) {
		ctx := ctxT(t, time.Minute)
		a, err := sb.CreateSession(ctx, &client.SessionOptions{ID: "sa"})
		if err != nil {
			t.Fatal(err)
		}
		b := sb.Session("sb")
		mustExec(t, a, "mkdir -p /tmp/sa && cd /tmp/sa && export HUTCH_A=1")
		if got := mustExec(t, a, "pwd; echo ${HUTCH_A:-unset}"); got != "/tmp/sa\n1\n" {
			t.Fatalf("session a = %q; want cwd and export kept", got)
		}
		if got := mustExec(t, b, "pwd; echo ${HUTCH_A:-unset}"); got != "/workspace\nunset\n" {
			t.Fatalf("session b = %q; want its own state", got)
		}
		if err := sb.DeleteSession(ctx, "sa"); err != nil {
			t.Fatal(err)
		}
	})
}

type execer interface {
	Exec(ctx context.Context, command string, opts *client.ExecOptions) (*client.ExecResult, error)
}

func mustExec(t *testing.T, e execer, cmd string) string {
	t.Helper()
	res, err := e.Exec(ctxT(t, time.Minute), cmd, nil)
	if err != nil {
		t.Fatalf("Exec(%q) = %v", cmd, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("Exec(%q) exit %d, stderr %q", cmd, res.ExitCode, res.Stderr)
	}
	return string(res.Stdout)
}

// processes lists the command lines of the sandbox's processes.
func processes(t *testing.T, sb *client.Sandbox) string {
	t.Helper()
	return mustExec(t, sb, "ps -eo args=")
}

func assertNoProcess(t *testing.T, sb *client.Sandbox, pattern string) {
	t.Helper()
	if ps := processes(t, sb); strings.Contains(ps, pattern) {
		t.Fatalf("%q still running:\n%s", pattern, ps)
	}
}

func assertNoProcessEventually(t *testing.T, sb *client.Sandbox, pattern string) {
	t.Helper()
	var ps string
	if !testutil.Poll(t, 200*time.Millisecond, 10*time.Second, func() bool { ps = processes(t, sb); return !strings.Contains(ps, pattern) }) {
		t.Fatalf("%q still running:\n%s", pattern, ps)
	}
}

// newCuttingProxy forwards TCP to target and closes both sides once the reply carried marker.
func newCuttingProxy(t *testing.T, target string, marker []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				var once sync.Once
				go func() { io.Copy(up, c); once.Do(func() {}) }()
				buf := make([]byte, 4096)
				var seen []byte
				for {
					n, err := up.Read(buf)
					if n > 0 {
						c.Write(buf[:n])
						seen = append(seen, buf[:n]...)
						if bytes.Contains(seen, marker) {
							return // cut: close both connections mid-stream
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

var _ = http.StatusOK
