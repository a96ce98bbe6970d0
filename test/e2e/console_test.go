package e2e

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// The test daemon serves the web console built in this checkout: its binary runs from a temp
// dir, so the default (<dir of hutchd>/../web/console/dist) would not find it. hutchd inherits
// the environment; init runs before TestMain starts it.
func init() {
	if dir, err := filepath.Abs(filepath.Join(repoRoot, "web", "console", "dist")); err == nil {
		os.Setenv("HUTCH_CONSOLE_DIR", dir)
	}
}

// TestConsoleBrowser drives the web console in real headless Chromium (test/console): sign in,
// open a file in the file tree, edit and save it; follow a process's log; see an exposed
// port's link; watch /workspace and see a write; type `echo hello` in a sandbox terminal and
// see `hello`, reload and see it replayed once. Then it reads the file back through the SDK.
func TestConsoleBrowser(t *testing.T) {
	requireEnv(t)
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (apt-get install chromium; scripts/host-setup.sh does)")
	}
	if !have("npm") || !have("node") {
		t.Skip("npm and node are not installed (Node.js 20+ builds the console)")
	}
	build := exec.Command("bash", "scripts/build-console.sh", "--browser-test")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build-console.sh: %v\n%s", err, out)
	}
	resp, err := http.Get(d.URL() + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(page, []byte("app.js")) {
		t.Fatalf("GET /console/ = %d %q", resp.StatusCode, page)
	}

	sb := sandbox(t, "console-e2e", nil)
	ctx := ctxT(t, 5*time.Minute)
	const file, oldContent, newContent = "/workspace/console-e2e.txt", "written by the SDK\n", "edited in the browser ✓\nsecond line\n"
	if err := sb.WriteFile(ctx, file, []byte(oldContent)); err != nil {
		t.Fatal(err)
	}

	if _, err := sb.StartProcess(ctx, "echo console-log-line; sleep 600", client.ProcessOptions{ID: "console-proc"}); err != nil {
		t.Fatal(err)
	}
	port, err := sb.ExposePort(ctx, 8080, client.ExposeOptions{Name: "web"})
	if err != nil {
		t.Fatal(err)
	}

	// HUTCH_CONSOLE_SCREENSHOT keeps a screenshot of the page (at the end, or where it failed).
	shot := os.Getenv("HUTCH_CONSOLE_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "console.png")
	}
	node := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", "console.test.mjs")
	node.Dir = filepath.Join(repoRoot, "test", "console")
	node.Env = append(os.Environ(),
		"HUTCH_URL="+d.URL(), "HUTCH_TOKEN="+d.Token, "HUTCH_SANDBOX="+sb.ID(),
		"HUTCH_FILE="+file, "HUTCH_FILE_OLD="+oldContent, "HUTCH_FILE_NEW="+newContent,
		"HUTCH_PROCESS=console-proc", "HUTCH_PORT_URL="+port.URL,
		"CHROMIUM="+browser, "HUTCH_SCREENSHOT="+shot)
	out, err := node.CombinedOutput()
	t.Logf("browser test:\n%s", out)
	if err != nil {
		t.Fatalf("browser test failed: %v\nhutchd log:\n%s", err, d.LogTail())
	}

	got, err := sb.ReadFile(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Content) != newContent {
		t.Errorf("after saving in the browser the file holds %q, want %q", got.Content, newContent)
	}
}
