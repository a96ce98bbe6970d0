package e2e

import (
	"bytes"
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
	t.Cleanup(func() { d.Client().SandboxHandle("e2e-cli").Destroy(ctxT(t, time.Minute)) })
	hutch := func(stdin string, args ...string) (string, string, int) {
		cmd := exec.CommandContext(ctxT(t, 5*time.Minute), filepath.Join(bins, "hutch"), args...)
		cmd.Env = append(os.Environ(), "HUTCH_URL="+d.URL(), "HUTCH_TOKEN="+d.Token)
		cmd.Stdin = strings.NewReader(stdin)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	if o, e, code := hutch("", "exec", "e2e-cli", "--", "sh", "-c", "echo hi; echo oops >&2; exit 7"); o != "hi\n" || e != "oops\n" || code != 7 {
		t.Fatalf("hutch exec = %q %q exit %d; want \"hi\\n\" \"oops\\n\" 7", o, e, code)
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
	if _, e, code := hutch("", "destroy", "e2e-cli"); code != 0 {
		t.Fatalf("hutch destroy exit %d: %s", code, e)
	}
	if _, e, code := hutch("", "status", "e2e-cli"); code == 0 || !strings.Contains(e, "SANDBOX_NOT_FOUND") {
		t.Fatalf("hutch status after destroy: exit %d stderr %q", code, e)
	}
}
