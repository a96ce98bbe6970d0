package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSandboxTextIsEscaped runs hutch against a real agent whose files and processes carry
// names a sandbox chose to attack the operator's terminal (an OSC that retitles it, a CR that
// overwrites the line): ls, watch and ps show them escaped, never the raw bytes; read, the data
// the user asked for, stays byte for byte.
func TestSandboxTextIsEscaped(t *testing.T) {
	url, workdir := agentURL(t)
	dir := filepath.Join(workdir, "w")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const osc, cr = "title\x1b]0;pwned\x07", "evil\rgood"
	const oscShown, crShown = `title\x1b]0;pwned\x07`, `evil\x0dgood`
	content := "raw \x1b[31mred\x1b[0m\r\n"
	for _, name := range []string{osc, cr} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw := func(t *testing.T, what, out string) {
		t.Helper()
		if strings.ContainsAny(out, "\x1b\x07\r") {
			t.Errorf("%s printed control characters raw: %q", what, out)
		}
	}

	r := run(t, url, "", "ls", "sb", dir)
	if r.code != 0 {
		t.Fatalf("ls = %+v", r)
	}
	raw(t, "ls", r.stdout)
	for _, want := range []string{oscShown, crShown} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("ls %q lacks %q", r.stdout, want)
		}
	}

	if r := run(t, url, "", "read", "sb", filepath.Join(dir, osc)); r.code != 0 || r.stdout != content {
		t.Errorf("read = %+v; want the file's bytes %q", r, content)
	}

	res := runWatchCLI(t, url, func() {
		if err := os.WriteFile(filepath.Join(dir, "new\x1b]0;x\x07\r"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		os.RemoveAll(dir)
	}, "watch", "sb", dir)
	raw(t, "watch", res.stdout+res.stderr)
	if !strings.Contains(res.stdout, `new\x1b]0;x\x07\x0d`) {
		t.Errorf("watch %q lacks the escaped name", res.stdout)
	}

	// Started through the API, as a sandbox's own code can on gVisor (the agent on its loopback).
	body, _ := json.Marshal(map[string]string{"processId": "p1", "command": "sleep 30 # \x1b]0;ps\x07\roverwritten"})
	resp, err := http.Post(url+"/v1/sandboxes/sb/process/start", "application/json", bytes.NewReader(body))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("process start: %v %v", resp, err)
	}
	resp.Body.Close()
	t.Cleanup(func() { run(t, url, "", "kill", "sb", "--all") })
	r = run(t, url, "", "ps", "sb")
	raw(t, "ps", r.stdout)
	// ps folds whitespace, the CR included, into one space.
	if r.code != 0 || !strings.Contains(r.stdout, `# \x1b]0;ps\x07 overwritten`) {
		t.Errorf("ps = %+v; want the command escaped", r)
	}
}
