package reaper

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/testutil"
)

// buildInit builds cmd/hutch-init statically into dir.
func buildInit(t *testing.T, dir string) string {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || len(bytes.TrimSpace(gomod)) == 0 {
		t.Skipf("go toolchain or module not found: %v", err)
	}
	root := filepath.Dir(string(bytes.TrimSpace(gomod)))
	bin := filepath.Join(dir, "hutch-init")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/hutch-init")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build hutch-init: %v\n%s", err, out)
	}
	return bin
}

// TestPID1ReapsOrphans runs hutch-init as PID 1 of a new PID namespace and checks that
// orphaned children never stay zombies, and that SIGTERM to PID 1 shuts the agent down.
func TestPID1ReapsOrphans(t *testing.T) {
	testutil.RequiresRoot(t, "a new PID namespace")
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare (util-linux) not installed")
	}
	dir := t.TempDir()
	bin := buildInit(t, dir)
	sockDir, err := os.MkdirTemp("", "hpid1")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "a.sock")
	cmd := exec.Command(unshare, "--fork", "--pid", "--mount-proc", "--kill-child",
		bin, "--socket", sock, "--workdir", filepath.Join(dir, "ws"), "--state-dir", filepath.Join(dir, "st"),
		// Not the machine's /var/lib/hutch-agent: a session saved there by another run (with a
		// cwd since removed) would be restored here.
		"--process-dir", filepath.Join(dir, "procs"), "--session-file", "")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	execCmd := func(command string) map[string]any {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"command": command, "timeoutMs": 20000})
		resp, err := client.Post("http://agent/api/execute", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatalf("exec %q: %v\nlogs:\n%s", command, err, logs.String())
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("exec %q: %d %v %v", command, resp.StatusCode, out, err)
		}
		return out
	}
	if !testutil.Poll(t, 20*time.Millisecond, 20*time.Second, func() bool {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatalf("agent did not come up; logs:\n%s", logs.String())
	}

	out := execCmd("tr '\\0' ' ' < /proc/1/cmdline")
	if !strings.Contains(out["stdout"].(string), "hutch-init") || strings.Contains(out["stdout"].(string), "serve") {
		t.Fatalf("PID 1 is %q; want hutch-init (the supervisor)", out["stdout"])
	}
	// Make orphans: their parent exits at once, they exit shortly after and are re-parented to PID 1.
	for range 10 {
		execCmd("sh -c 'sleep 0.1 & exit 0'")
	}
	execCmd("sh -c '(sleep 0.2 &) ; (sleep 0.2 &)'")
	zombies := func() string {
		out := execCmd(`for f in /proc/[0-9]*/stat; do read -r l < "$f" 2>/dev/null && echo "$l"; done; true`)
		var z []string
		for _, line := range strings.Split(out["stdout"].(string), "\n") {
			// pid (comm) state ...
			i := strings.LastIndexByte(line, ')')
			if i < 0 || i+2 >= len(line) {
				continue
			}
			if line[i+2] == 'Z' {
				z = append(z, line)
			}
		}
		return strings.Join(z, "\n")
	}
	// The first look comes after the orphans (0.1 s and 0.2 s sleeps) exited: before that, no
	// zombies would prove nothing.
	time.Sleep(400 * time.Millisecond)
	var z string
	if !testutil.Poll(t, 400*time.Millisecond, 10*time.Second, func() bool { z = zombies(); return z == "" }) {
		t.Fatalf("zombies remain in the sandbox:\n%s", z)
	}
	if n := execCmd("sleep 0.5; ls -d /proc/[0-9]* | wc -l")["stdout"].(string); n == "" {
		t.Fatal("no process count")
	}

	// SIGTERM to PID 1 (its host PID is unshare's child) stops the agent cleanly.
	children, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/task/" + strconv.Itoa(cmd.Process.Pid) + "/children")
	if err != nil {
		t.Fatal(err)
	}
	pid1, err := strconv.Atoi(strings.Fields(string(children))[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid1, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("after SIGTERM: %v; logs:\n%s", err, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("agent did not stop on SIGTERM; logs:\n%s", logs.String())
	}
	if _, err := os.Stat(sock); err == nil {
		t.Error("socket left behind after shutdown")
	}
}
