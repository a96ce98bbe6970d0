package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAgentSessionExample runs examples/agent-session against the test daemon: a git checkout
// over smart HTTP from the host through the operator upstream, npm install from the real npm
// registry through the egress proxy, and npm test (mocha), streamed.
func TestAgentSessionExample(t *testing.T) {
	requireEnv(t)
	parallel(t)
	t.Cleanup(func() { d.Client().SandboxHandle("e2e-agent-session-47").Destroy(ctxT(t, time.Minute)) })
	cmd := exec.CommandContext(ctxT(t, 15*time.Minute), filepath.Join(bins, "agent-session"),
		"--url", d.URL(), "--token", d.Token, "--sandbox", "e2e-agent-session-47",
		"--git-listen", gitAddr, "--git-host", gitHost)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("example output:\n%s", out.String())
	if err != nil {
		t.Fatalf("agent-session example: %v\nhutchd log:\n%s", err, d.LogTail())
	}
	for _, want := range []string{"cloned http://git.internal/node-demo.git", "3 passing", "npm test exited with 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestCLI drives the hutch CLI as a user would.
func TestCLI(t *testing.T) {
	requireEnv(t)
	parallel(t)
	t.Cleanup(func() { d.Client().SandboxHandle("e2e-cli").Destroy(ctxT(t, time.Minute)) })
	hutch := func(stdin string, args ...string) (string, string, int) {
		cmd := exec.CommandContext(ctxT(t, 5*time.Minute), filepath.Join(bins, "hutch"), args...)
		cmd.Env = append(os.Environ(), "HUTCH_URL="+d.URL(), "HUTCH_TOKEN="+d.Token)
		cmd.Stdin = strings.NewReader(stdin)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	// The first exec creates the sandbox and says so on stderr; the second does not.
	created := "hutch: created sandbox e2e-cli (none had that name; 'hutch destroy e2e-cli' removes it)\n"
	for _, notice := range []string{created, ""} {
		if o, e, code := hutch("", "exec", "e2e-cli", "--", "sh", "-c", "echo hi; echo oops >&2; exit 7"); o != "hi\n" || e != notice+"oops\n" || code != 7 {
			t.Fatalf("hutch exec = %q %q exit %d; want \"hi\\n\" %q 7", o, e, code, notice+"oops\n")
		}
	}
	if _, e, code := hutch("payload\x00\x01bytes", "write", "e2e-cli", "/workspace/f.bin"); code != 0 {
		t.Fatalf("hutch write exit %d: %s", code, e)
	}
	if o, e, code := hutch("", "read", "e2e-cli", "/workspace/f.bin"); o != "payload\x00\x01bytes" || code != 0 {
		t.Fatalf("hutch read = %q exit %d: %s", o, code, e)
	}
	if o, _, code := hutch("", "list"); code != 0 || !strings.Contains(o, "e2e-cli") {
		t.Fatalf("hutch list = %q exit %d", o, code)
	}
	if o, _, code := hutch("", "status", "e2e-cli"); code != 0 || !strings.Contains(o, "running") {
		t.Fatalf("hutch status = %q exit %d", o, code)
	}
	if _, e, code := hutch("", "read", "e2e-cli", "/workspace/missing"); code == 0 || !strings.Contains(e, "FILE_NOT_FOUND") {
		t.Fatalf("hutch read missing: exit %d stderr %q; want FILE_NOT_FOUND", code, e)
	}
	// Background processes and ports (issue 3's CLI).
	o, e, code := hutch("", "start", "e2e-cli", "--id", "srv", "--wait-log", "^serving$", "--", "sh", "-c", "echo serving; echo warn >&2; sleep 300")
	if code != 0 || !strings.HasPrefix(o, "srv") {
		t.Fatalf("hutch start -- CMD = %q exit %d: %s", o, code, e)
	}
	if o, e, code := hutch("", "ps", "e2e-cli"); code != 0 || !strings.Contains(o, "srv") || !strings.Contains(o, "running") {
		t.Fatalf("hutch ps = %q exit %d: %s", o, code, e)
	}
	if o, e, code := hutch("", "logs", "e2e-cli", "srv"); code != 0 || o != "serving\n" || e != "warn\n" {
		t.Fatalf("hutch logs = %q %q exit %d", o, e, code)
	}
	if o, e, code := hutch("", "kill", "e2e-cli", "srv"); code != 0 || !strings.Contains(o, "killed") {
		t.Fatalf("hutch kill = %q exit %d: %s", o, code, e)
	}
	if o, e, code := hutch("", "logs", "-f", "e2e-cli", "srv"); code != 143 && code != 137 || o != "serving\n" {
		t.Fatalf("hutch logs -f of a killed process = %q exit %d: %s; want exit 143 or 137", o, code, e)
	}
	if o, e, code := hutch("", "expose", "e2e-cli", "8080", "--token", "clitoken"); code != 0 || !strings.Contains(o, "8080-e2e-cli-clitoken.localhost") {
		t.Fatalf("hutch expose = %q exit %d: %s", o, code, e)
	}
	if o, _, code := hutch("", "ports", "e2e-cli"); code != 0 || !strings.Contains(o, "8080") {
		t.Fatalf("hutch ports = %q exit %d", o, code)
	}
	if _, e, code := hutch("", "expose", "e2e-cli", "80"); code == 0 || !strings.Contains(e, "INVALID_PORT") {
		t.Fatalf("hutch expose 80: exit %d stderr %q; want INVALID_PORT", code, e)
	}
	if _, e, code := hutch("", "destroy", "e2e-cli"); code != 0 {
		t.Fatalf("hutch destroy exit %d: %s", code, e)
	}
	if _, e, code := hutch("", "status", "e2e-cli"); code == 0 || !strings.Contains(e, "SANDBOX_NOT_FOUND") {
		t.Fatalf("hutch status after destroy: exit %d stderr %q", code, e)
	}
}

// TestDevServerExample runs examples/dev-server against the test daemon (issue 3's real input):
// a Vite project from the npm registry, `npm run dev` as a background process, waitForLog on
// Vite's "Local:" line, exposePort, and the page fetched through the preview URL; with Chromium
// installed, the page is also rendered headless and its JavaScript must have run.
func TestDevServerExample(t *testing.T) {
	requireEnv(t)
	parallel(t)
	t.Cleanup(func() { d.Client().SandboxHandle("e2e-dev-server").Destroy(ctxT(t, time.Minute)) })
	args := []string{"--url", d.URL(), "--token", d.Token, "--sandbox", "e2e-dev-server"}
	if b, err := exec.LookPath("chromium"); err == nil {
		args = append(args, "--browser", b)
	} else {
		t.Log("chromium is not installed (apt-get install chromium): the page is fetched but not rendered")
	}
	cmd := exec.CommandContext(ctxT(t, 10*time.Minute), filepath.Join(bins, "dev-server"), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("example output:\n%s", out.String())
	if err != nil {
		t.Fatalf("dev-server example: %v\nhutchd log:\n%s", err, d.LogTail())
	}
	for _, want := range []string{"Vite is ready", "preview URL: http://5173-e2e-dev-server-", "the Vite page"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
