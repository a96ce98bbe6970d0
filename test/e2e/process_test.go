package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
)

// TestProcessAcceptance runs acceptance cases P1, P4 and P5 (shared/acceptance/cases.md) and the
// log requirements of the processes issue through hutchd.
func TestProcessAcceptance(t *testing.T) {
	requireEnv(t)
	sb := sandbox(t, "e2e-proc", nil)

	t.Run("P1 kill leaves nothing listening", func(t *testing.T) {
		ctx := ctxT(t, 2*time.Minute)
		p, err := sb.StartProcess(ctx, `sh -c 'python3 -m http.server 8000 & wait'`, client.ProcessOptions{ID: "p1-server"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.WaitForPort(ctx, 8000, client.PortWaitOptions{Mode: "http", Timeout: time.Minute}); err != nil {
			t.Fatalf("WaitForPort(8000) = %v", err)
		}
		info, err := p.Kill(ctx, -1)
		if err != nil {
			t.Fatal(err)
		}
		if info.Status != "killed" || info.ExitCode == nil || (*info.ExitCode != 143 && *info.ExitCode != 137) {
			t.Fatalf("after Kill: status %q exit %v; want killed with 143 or 137", info.Status, info.ExitCode)
		}
		assertNoProcess(t, sb, "http.server")
		res, err := sb.Exec(ctx, `python3 -c 'import socket; socket.create_connection(("127.0.0.1", 8000), 2)'`, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode == 0 {
			t.Fatal("something still listens on 8000 after killProcess")
		}
	})

	t.Run("P4 finished process readable after stop, sleep and hutchd restart", func(t *testing.T) {
		ctx := ctxT(t, 3*time.Minute)
		p, err := sb.StartProcess(ctx, `echo to-stdout; echo to-stderr >&2; exit 3`, client.ProcessOptions{ID: "p4-done"})
		if err != nil {
			t.Fatal(err)
		}
		ex, err := p.WaitForExit(ctx, time.Minute)
		if err != nil || ex.ExitCode != 3 {
			t.Fatalf("WaitForExit = %+v, %v; want exit 3", ex, err)
		}
		check := func(when string) {
			t.Helper()
			got, err := sb.GetProcess(ctx, "p4-done")
			if err != nil {
				t.Fatalf("%s: GetProcess = %v", when, err)
			}
			info := got.Info()
			if info.Status != "failed" || info.ExitCode == nil || *info.ExitCode != 3 {
				t.Fatalf("%s: status %q exit %v; want failed, 3", when, info.Status, info.ExitCode)
			}
			logs, err := got.Logs(ctx)
			if err != nil {
				t.Fatalf("%s: Logs = %v", when, err)
			}
			if string(logs.Stdout) != "to-stdout\n" || string(logs.Stderr) != "to-stderr\n" {
				t.Fatalf("%s: logs stdout %q stderr %q", when, logs.Stdout, logs.Stderr)
			}
		}
		check("finished")
		if _, err := sb.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		check("after stop (the read starts the sandbox again)")
		if _, err := sb.Sleep(ctx); err != nil {
			t.Fatal(err)
		}
		if info, err := sb.Info(ctx); err != nil || info.Status != client.StatusSleeping {
			t.Fatalf("after Sleep: %+v, %v; want sleeping", info, err)
		}
		check("after sleep (the read wakes the sandbox)")
		d.Kill9()
		if err := d.Start(ctx); err != nil {
			t.Fatalf("restart hutchd: %v", err)
		}
		check("after kill -9 and restart of hutchd")
	})

	t.Run("P5 waitForPort fails fast when the process exits", func(t *testing.T) {
		ctx := ctxT(t, 2*time.Minute)
		p, err := sb.StartProcess(ctx, `sleep 1; exit 7`, client.ProcessOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.WaitForPort(ctx, 8765, client.PortWaitOptions{Mode: "tcp", Timeout: 90 * time.Second})
		if !errdefs.IsCode(err, errdefs.CodeProcessExitedEarly) {
			t.Fatalf("WaitForPort = %v; want PROCESS_EXITED_BEFORE_READY", err)
		}
		var ee *errdefs.Error
		if !errors.As(err, &ee) || fmt.Sprint(ee.Context["exitCode"]) != "7" {
			t.Fatalf("error context = %v; want exitCode 7", err)
		}
		// The same for waitForLog.
		p2, err := sb.StartProcess(ctx, `echo starting; exit 4`, client.ProcessOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p2.WaitForLog(ctx, `ready on (\d+)`, 90*time.Second); !errdefs.IsCode(err, errdefs.CodeProcessExitedEarly) {
			t.Fatalf("WaitForLog = %v; want PROCESS_EXITED_BEFORE_READY", err)
		}
	})

	t.Run("waitForLog returns the line and groups", func(t *testing.T) {
		ctx := ctxT(t, time.Minute)
		p, err := sb.StartProcess(ctx, `echo booting; sleep 0.5; echo "ready on port 4321" >&2; sleep 300`, client.ProcessOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Kill(ctx, 0)
		m, err := p.WaitForLog(ctx, `ready on port (\d+)`, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m.Line != "ready on port 4321" || len(m.Match) != 2 || m.Match[1] != "4321" {
			t.Fatalf("WaitForLog = %+v", m)
		}
	})

	t.Run("50 MiB of output keeps the agent bounded", func(t *testing.T) {
		ctx := ctxT(t, 3*time.Minute)
		const total = 50 << 20
		p, err := sb.StartProcess(ctx, fmt.Sprintf(`head -c %d /dev/zero | tr '\0' x`, total), client.ProcessOptions{LogBufferBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if ex, err := p.WaitForExit(ctx, 2*time.Minute); err != nil || ex.ExitCode != 0 {
			t.Fatalf("WaitForExit = %+v, %v", ex, err)
		}
		logs, err := p.Logs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if logs.StdoutEnd != total || logs.StdoutDropped != total-(1<<20) {
			t.Fatalf("stdout end %d dropped %d; want %d, %d", logs.StdoutEnd, logs.StdoutDropped, total, total-(1<<20))
		}
		if !bytes.Contains(logs.Stdout[:200], []byte("dropped")) || len(logs.Stdout) > 1<<20+200 {
			t.Fatalf("stdout holds %d bytes starting %q; want ≤ 1 MiB after a dropped marker", len(logs.Stdout), logs.Stdout[:80])
		}
		// The agent never held the 50 MiB: its peak resident size stays far below.
		if defaultRuntime == "gvisor" {
			t.Log("peak RSS not checked: gVisor's /proc/<pid>/status has no VmHWM")
			return
		}
		res, err := sb.Exec(ctx, `for p in $(pgrep -f 'hutch-init serve'); do grep VmHWM /proc/$p/status; done`, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				t.Fatalf("agent VmHWM: %q", res.Stdout)
			}
			kb, _ := strconv.Atoi(f[1])
			if kb > 48<<10 {
				t.Fatalf("agent peak RSS %d KiB after 50 MiB of output with a 1 MiB buffer", kb)
			}
		}
	})

	t.Run("cut stream resumes exactly", func(t *testing.T) {
		ctx := ctxT(t, 2*time.Minute)
		p, err := sb.StartProcess(ctx, `for i in $(seq 1 3000); do echo "line $i"; echo "err $i" >&2; done; sleep 1; echo last`, client.ProcessOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Read part of the stream over a raw connection, cut it, then resume from the offsets.
		var out, errOut bytes.Buffer
		offs := [2]int64{}
		read := func(limit int) bool {
			q := url.Values{"stdoutOffset": {strconv.FormatInt(offs[0], 10)}, "stderrOffset": {strconv.FormatInt(offs[1], 10)}}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.URL()+"/v1/sandboxes/e2e-proc/process/"+p.ID()+"/stream?"+q.Encode(), nil)
			req.Header.Set("Authorization", "Bearer "+d.Token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			r := sse.NewReader(resp.Body)
			for n := 0; limit == 0 || n < limit; n++ {
				raw, err := r.Next()
				if err != nil {
					t.Fatalf("stream ended without exit: %v", err)
				}
				var ev struct {
					Type, Data, Encoding string
					Offset               int64
				}
				if err := json.Unmarshal(raw, &ev); err != nil {
					t.Fatal(err)
				}
				switch ev.Type {
				case "stdout", "stderr":
					i, buf := 0, &out
					if ev.Type == "stderr" {
						i, buf = 1, &errOut
					}
					if ev.Offset != offs[i] {
						t.Fatalf("%s chunk at offset %d; want %d (gap or duplicate)", ev.Type, ev.Offset, offs[i])
					}
					buf.WriteString(ev.Data)
					offs[i] += int64(len(ev.Data))
				case "exit":
					return true
				}
			}
			return false
		}
		cuts := 0
		for !read(3) {
			cuts++
		}
		if cuts == 0 {
			t.Fatal("the stream ended before it could be cut")
		}
		logs, err := p.Logs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if out.String() != string(logs.Stdout) || errOut.String() != string(logs.Stderr) {
			t.Fatalf("resumed stream (%d/%d bytes) differs from the logs (%d/%d bytes)", out.Len(), errOut.Len(), len(logs.Stdout), len(logs.Stderr))
		}
		if !strings.HasSuffix(out.String(), "line 3000\nlast\n") {
			t.Fatalf("stdout ends %q", out.String()[max(0, out.Len()-40):])
		}
	})

	t.Run("processes are sandbox-wide", func(t *testing.T) {
		ctx := ctxT(t, time.Minute)
		p, err := sb.StartProcess(ctx, `sleep 300`, client.ProcessOptions{ID: "sess-proc", SessionID: "other-session"})
		if err != nil {
			t.Fatal(err)
		}
		list, err := sb.ListProcesses(ctx, "running")
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, pi := range list {
			found = found || pi.ID == "sess-proc"
		}
		if !found {
			t.Fatalf("ListProcesses(running) = %+v; want sess-proc", list)
		}
		n, err := sb.KillAllProcesses(ctx)
		if err != nil || n < 1 {
			t.Fatalf("KillAllProcesses = %d, %v", n, err)
		}
		if info, _ := p.Refresh(ctx); info.Status != "killed" {
			t.Fatalf("after killAll: %q", info.Status)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		ctx := ctxT(t, time.Minute)
		if _, err := sb.GetProcess(ctx, "no-such-process"); !errdefs.IsCode(err, errdefs.CodeProcessNotFound) {
			t.Errorf("GetProcess(unknown) = %v; want PROCESS_NOT_FOUND", err)
		}
		if _, err := sb.Process("no-such-process").Kill(ctx, 0); !errdefs.IsCode(err, errdefs.CodeProcessNotFound) {
			t.Errorf("Kill(unknown) = %v; want PROCESS_NOT_FOUND", err)
		}
		p, err := sb.StartProcess(ctx, `sleep 300`, client.ProcessOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Kill(ctx, 0)
		if _, err := p.WaitForLog(ctx, `(unclosed`, time.Second); !errdefs.IsCode(err, errdefs.CodeInvalidPattern) {
			t.Errorf("WaitForLog(bad regex) = %v; want INVALID_PATTERN", err)
		}
		if _, err := p.WaitForLog(ctx, `never printed`, 500*time.Millisecond); !errdefs.IsCode(err, errdefs.CodeProcessReadyTimeout) {
			t.Errorf("WaitForLog(timeout) = %v; want PROCESS_READY_TIMEOUT", err)
		}
		if _, err := p.WaitForPort(ctx, 70000, client.PortWaitOptions{Timeout: time.Second}); !errdefs.IsCode(err, errdefs.CodeInvalidPort) {
			t.Errorf("WaitForPort(70000) = %v; want INVALID_PORT", err)
		}
		if _, err := sb.StartProcess(ctx, ``, client.ProcessOptions{}); !errdefs.IsCode(err, errdefs.CodeInvalidCommand) {
			t.Errorf("StartProcess(empty) = %v; want INVALID_COMMAND", err)
		}
		if _, err := sb.StartProcess(ctx, `true`, client.ProcessOptions{ID: p.ID()}); !errdefs.IsCode(err, errdefs.CodeProcessExists) {
			t.Errorf("StartProcess(duplicate id) = %v; want PROCESS_ALREADY_EXISTS", err)
		}
	})
}
