package e2e

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
)

// TestBigBufferedOutputInLiteSandbox: 20 MiB of output through the buffered exec in a 256 MiB
// sandbox is cut at the documented cap, and neither the agent nor the sandbox's other
// processes die for memory.
func TestBigBufferedOutputInLiteSandbox(t *testing.T) {
	requireEnv(t)
	sb := sandbox(t, "e2e-bigout", &client.SandboxOptions{InstanceType: "lite"})
	mustExec(t, sb, "nohup sleep 1000 >/dev/null 2>&1 &")
	for _, cmd := range []string{"head -c 20M /dev/zero", "head -c 20M /dev/urandom"} {
		res, err := sb.Exec(ctxT(t, 5*time.Minute), cmd, nil)
		if err != nil {
			t.Fatalf("Exec(%s) = %v\nhutchd log:\n%s", cmd, err, d.LogTail())
		}
		if !res.Truncated || len(res.Stdout) != 16<<20 || res.ExitCode != 0 {
			t.Fatalf("Exec(%s): truncated=%v, %d bytes, exit %d; want truncated at 16 MiB", cmd, res.Truncated, len(res.Stdout), res.ExitCode)
		}
		if cmd == "head -c 20M /dev/zero" && !bytes.Equal(res.Stdout[:1024], make([]byte, 1024)) {
			t.Fatal("stdout is not the command's bytes")
		}
	}
	if ps := processes(t, sb); !strings.Contains(ps, "sleep 1000") {
		t.Fatalf("the sandbox lost its background process (agent or sandbox died):\n%s", ps)
	}
}

// TestForkBombTimeout: a fork bomb whose processes leave their session and parent is stopped
// and killed by the command's timeout, and the sandbox keeps working.
func TestForkBombTimeout(t *testing.T) {
	requireEnv(t)
	sb := sandbox(t, "e2e-bomb", &client.SandboxOptions{InstanceType: "lite"})
	mustExec(t, sb, "nohup sleep 1001 >/dev/null 2>&1 &")
	bomb := `python3 -c '
import os
while True:
    try:
        if os.fork() == 0:
            os.setsid()
            if os.fork() > 0:
                os._exit(0)
    except OSError:
        pass
'`
	start := time.Now()
	_, err := sb.Exec(ctxT(t, 5*time.Minute), bomb, &client.ExecOptions{Timeout: 2 * time.Second})
	if !errdefs.IsCode(err, errdefs.CodeCommandTimeout) {
		t.Fatalf("fork bomb: err = %v; want COMMAND_TIMEOUT", err)
	}
	t.Logf("the fork bomb was stopped %s after it started", time.Since(start).Round(time.Millisecond))
	if got := mustExec(t, sb, "echo alive"); got != "alive\n" {
		t.Fatalf("after the fork bomb: %q", got)
	}
	assertNoProcessEventually(t, sb, "python3")
	// The agent survived (a dead agent stops the sandbox and its background processes).
	if ps := processes(t, sb); !strings.Contains(ps, "sleep 1001") {
		t.Fatalf("the sandbox restarted during the fork bomb:\n%s", ps)
	}
}
