package e2e

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/testutil"
)

// tmuxSocket is the tmux server of these tests (tmux -L), apart from any other.
const tmuxSocket = "hutche2e"

// tmux runs a tmux command on the test server.
func tmux(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", tmuxSocket}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

// waitPane waits until tmux session's pane shows want; it returns the pane.
func waitPane(t *testing.T, session, want string) string {
	t.Helper()
	var pane string
	if !testutil.Poll(t, 100*time.Millisecond, 2*time.Minute, func() bool {
		pane = tmux(t, "capture-pane", "-p", "-J", "-t", session)
		return strings.Contains(pane, want)
	}) {
		t.Fatalf("pane of %s never showed %q:\n%s\nhutchd log:\n%s", session, want, pane, d.LogTail())
	}
	return pane
}

// TestShellTmux drives `hutch shell` in a real terminal (tmux): type a command and see its
// output, detach with Ctrl-] d, reattach and see the replay, exit with the shell's code.
func TestShellTmux(t *testing.T) {
	requireEnv(t)
	if !have("tmux") {
		t.Skip("tmux is not installed (apt-get install tmux)")
	}
	t.Cleanup(func() {
		exec.Command("tmux", "-L", tmuxSocket, "kill-server").Run()
		d.Client().SandboxHandle("e2e-shell").Destroy(ctxT(t, time.Minute))
	})
	run := func(session string) {
		cmd := "HUTCH_URL=" + d.URL() + " HUTCH_TOKEN=" + d.Token + " " + filepath.Join(bins, "hutch") +
			" shell e2e-shell --terminal tm; echo hutch-exit=$?; sleep 600"
		tmux(t, "new-session", "-d", "-s", session, "-x", "100", "-y", "30", cmd)
	}
	run("one")
	waitPane(t, "one", "# ")
	tmux(t, "send-keys", "-t", "one", "echo tmux-$((6*7)); stty size", "Enter")
	waitPane(t, "one", "tmux-42")
	waitPane(t, "one", "30 100")
	// Window size changes reach the shell.
	tmux(t, "resize-window", "-t", "one", "-x", "90", "-y", "25")
	time.Sleep(500 * time.Millisecond)
	tmux(t, "send-keys", "-t", "one", "stty size", "Enter")
	waitPane(t, "one", "25 90")
	// Detach: the shell runs on.
	tmux(t, "send-keys", "-t", "one", "C-]", "d")
	pane := waitPane(t, "one", "hutch-exit=")
	if !strings.Contains(pane, "[detached from terminal tm") || !strings.Contains(pane, "hutch-exit=0") {
		t.Fatalf("after detach:\n%s", pane)
	}
	list, err := d.Client().SandboxHandle("e2e-shell").ListTerminals(ctxT(t, time.Minute))
	if err != nil || len(list) != 1 || list[0].ID != "tm" || list[0].Exited {
		t.Fatalf("terminals after detach = %+v %v", list, err)
	}
	// Reattach: the replay shows the earlier output; exit ends hutch with the shell's code.
	run("two")
	waitPane(t, "two", "tmux-42")
	tmux(t, "send-keys", "-t", "two", "exit 5", "Enter")
	waitPane(t, "two", "hutch-exit=5")

	// Without a terminal (stdin a pipe): no raw mode; the input runs, hutch exits with the code.
	cmd := exec.CommandContext(ctxT(t, 2*time.Minute), filepath.Join(bins, "hutch"), "shell", "e2e-shell", "--terminal", "pipe")
	cmd.Env = append(cmd.Environ(), "HUTCH_URL="+d.URL(), "HUTCH_TOKEN="+d.Token)
	cmd.Stdin = strings.NewReader("echo piped-$((1+1)); exit 4\n")
	out, err := cmd.Output()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 4 || !strings.Contains(string(out), "piped-2") {
		t.Fatalf("hutch shell with a pipe: %v, output %q; want exit 4 and piped-2", err, out)
	}
}
