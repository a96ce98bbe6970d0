package e2e

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/runsc"
)

// TestGVisor runs a representative part of every earlier issue on a sandbox of the gvisor
// runtime: exec, files, a background process behind a preview URL, a terminal, a watch, a
// Python code context, and egress through hutchd's proxy to a real host. It skips when runsc
// is not installed.
func TestGVisor(t *testing.T) {
	requireEnv(t)
	if !have("runsc") {
		t.Skip("runsc is not installed (apt-get install runsc)")
	}
	ctx := ctxT(t, 15*time.Minute)
	c := d.Client()

	t.Run("unknown runtime refused", func(t *testing.T) {
		_, err := c.Sandbox(ctx, "e2e-gv-bad", &client.SandboxOptions{Runtime: "kata"})
		var e *errdefs.Error
		if !errors.As(err, &e) || e.Code != errdefs.CodeInvalidRuntime {
			t.Fatalf("create with runtime kata = %v; want INVALID_RUNTIME", err)
		}
		if _, err := c.SandboxHandle("e2e-gv-bad").Info(ctx); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
			t.Fatalf("refused sandbox exists: %v", err)
		}
	})

	sb := sandbox(t, "e2e-gvisor", &client.SandboxOptions{Runtime: "gvisor"})
	info, err := sb.Info(ctx)
	if err != nil || info.Runtime != "gvisor" {
		t.Fatalf("Info = %+v, %v; want runtime gvisor", info, err)
	}

	t.Run("exec runs under gVisor", func(t *testing.T) {
		// The Sentry reports its own kernel, "Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST
		// 2016" (dmesg would show gVisor's boot log, but syslog is outside the seccomp
		// allow-list on both runtimes).
		if out := mustExec(t, sb, "cat /proc/version; echo $((6*7))"); !strings.Contains(out, "Sun Jan 10 15:06:54 PST 2016") || !strings.Contains(out, "42") {
			t.Fatalf("exec output %q; want gVisor's /proc/version and 42", out)
		}
		res, err := sb.Exec(ctx, "echo err >&2; exit 3", nil)
		if err != nil || res.ExitCode != 3 || string(res.Stderr) != "err\n" {
			t.Fatalf("Exec = %+v, %v", res, err)
		}
	})

	t.Run("ls and stat (statx)", func(t *testing.T) {
		// Debian's runsc 20221219 refused coreutils 9.1's statx calls with EINVAL (ls, stat
		// and mount(8) failed); the runsc host-setup.sh installs answers them.
		out := mustExec(t, sb, "stat -c %F /workspace && ls -ld / | cut -c1")
		if out != "directory\nd\n" {
			t.Fatalf("stat/ls = %q; want \"directory\\nd\\n\"", out)
		}
	})

	t.Run("files", func(t *testing.T) {
		if err := sb.WriteFile(ctx, "notes/hello.txt", []byte("héllo gvisor\n")); err != nil {
			t.Fatal(err)
		}
		got, err := sb.ReadFile(ctx, "/workspace/notes/hello.txt")
		if err != nil || string(got.Content) != "héllo gvisor\n" {
			t.Fatalf("ReadFile = %+v, %v", got, err)
		}
		if out := mustExec(t, sb, "cat /workspace/notes/hello.txt"); out != "héllo gvisor\n" {
			t.Fatalf("cat = %q", out)
		}
	})

	t.Run("process, exposed port and preview URL", func(t *testing.T) {
		p, err := sb.StartProcess(ctx, "python3 -m http.server 5173 --bind 127.0.0.1", client.ProcessOptions{ID: "web"})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Kill(ctx, 0)
		if _, err := p.WaitForPort(ctx, 5173, client.PortWaitOptions{Mode: "http", Timeout: time.Minute}); err != nil {
			t.Fatal(err)
		}
		ep, err := sb.ExposePort(ctx, 5173, client.ExposeOptions{Name: "web"})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := previewHTTP().Get(ep.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("Directory listing")) {
			t.Fatalf("GET %s = %d %q", ep.URL, resp.StatusCode, body[:min(len(body), 200)])
		}
	})

	t.Run("terminal", func(t *testing.T) {
		_, r := openTerminal(t, sb, "gv1", client.TerminalOptions{Cols: 80, Rows: 24})
		r.send("stty size; echo pty-$((40+2))\n")
		r.until("24 80")
		r.until("pty-42")
	})

	t.Run("watch", func(t *testing.T) {
		mustExec(t, sb, "mkdir -p /workspace/watched")
		_, ch := openWatch(t, sb, "/workspace/watched", client.WatchOptions{})
		mustExec(t, sb, "echo x > /workspace/watched/new.txt")
		until(t, ch, isEvent(client.WatchCreate, "/workspace/watched/new.txt"))
	})

	t.Run("python code context", func(t *testing.T) {
		cc, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{Language: client.LanguagePython})
		if err != nil {
			t.Fatal(err)
		}
		runOK(t, sb, cc.ID, "x = 6 * 7")
		out := runOK(t, sb, cc.ID, "x")
		if len(out.Results) == 0 || out.Results[0].Text != "42" {
			t.Fatalf("x = %+v; want 42", out.Results)
		}
	})

	t.Run("re-adopted after kill -9 of hutchd", func(t *testing.T) {
		mustExec(t, sb, "nohup sleep 1000 >/dev/null 2>&1 &")
		d.Kill9()
		if err := d.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if info, err := sb.Info(ctx); err != nil || info.Status != "running" || info.Runtime != "gvisor" {
			t.Fatalf("after restart: %+v, %v; want running on gvisor", info, err)
		}
		if out := mustExec(t, sb, "pgrep -x sleep >/dev/null && echo kept"); out != "kept\n" {
			t.Fatalf("process did not survive the restart: %q", out)
		}
	})

	t.Run("sleep and wake", func(t *testing.T) {
		// /tmp is on the sandbox's disk as on runc (runsc would put a tmpfs there): it lasts.
		mustExec(t, sb, "echo kept > /tmp/keep.txt")
		info, err := sb.Sleep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A runsc that can checkpoint keeps the memory (TestMemorySnapshot goes further); an
		// older one keeps the disk and says why.
		wantMode := "memory"
		if p, err := exec.LookPath("runsc"); err == nil && runsc.ProbeCheckpoint(p) != nil {
			wantMode = "disk"
		}
		if info.Status != client.StatusSleeping || info.SleepMode != wantMode || (wantMode == "disk") != (info.SleepNote != "") {
			t.Fatalf("after Sleep: status %q, sleepMode %q, sleepNote %q; want %s", info.Status, info.SleepMode, info.SleepNote, wantMode)
		}
		if out := mustExec(t, sb, "cat /workspace/notes/hello.txt"); out != "héllo gvisor\n" {
			t.Fatalf("after wake: %q", out)
		}
		if out := mustExec(t, sb, "cat /tmp/keep.txt"); out != "kept\n" {
			t.Fatalf("/tmp after wake: %q (a tmpfs?)", out)
		}
	})

	t.Run("egress through hutchd", func(t *testing.T) {
		proxy := goProxy(t)
		url := proxy + "/golang.org/x/term/@v/list"
		out := mustExec(t, sb, "curl -sS --max-time 60 -o /dev/null -w '%{http_code}' '"+url+"'")
		if out != "200" {
			t.Fatalf("GET %s via hutchd = %q; want 200", url, out)
		}
	})
}

// goProxy returns the first module proxy that the host's go command uses (`go env GOPROXY`),
// a server this machine is known to reach, or skips the test when it names none.
func goProxy(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOPROXY").Output()
	if err != nil {
		t.Skipf("go env GOPROXY: %v", err)
	}
	for _, p := range strings.FieldsFunc(strings.TrimSpace(string(out)), func(r rune) bool { return r == ',' || r == '|' }) {
		if strings.HasPrefix(p, "https://") || strings.HasPrefix(p, "http://") {
			return strings.TrimSuffix(p, "/")
		}
	}
	t.Skipf("GOPROXY %q names no proxy URL", strings.TrimSpace(string(out)))
	return ""
}
