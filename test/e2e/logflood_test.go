package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
)

// logFlood is run inside a sandbox: 250 absolute-form requests whose target is 60 KB, each on
// a connection of its own to port 80 (redirected to the egress proxy), which refuses them
// (raw IP) and logs the target. It prints how many answers were 4xx.
const logFlood = `python3 - <<'PY'
import socket
target = "http://1.1.1.1/" + "A" * 60000
refused = 0
for i in range(250):
    s = socket.create_connection(("1.1.1.1", 80), timeout=10)
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % target).encode())
    if s.recv(12).startswith(b"HTTP/1.1 4"):
        refused += 1
    s.close()
print(refused)
PY`

// TestSandboxCannotFloodHutchdLog replays the log flood from inside a sandbox (runc, and
// gVisor where runsc is installed): 250 refused requests with a 60 KB target, each logged
// by the egress proxy with the target and host, must grow hutchd's log by less than 256 KiB
// (values cut at 1 KiB, one sandbox's lines rate-limited), not by the 15 MB they wrote before.
func TestSandboxCannotFloodHutchdLog(t *testing.T) {
	for _, rt := range []string{"runc", "gvisor"} {
		t.Run(rt, func(t *testing.T) {
			if rt == "gvisor" && !have("runsc") {
				t.Skip("runsc is not installed (scripts/host-setup.sh installs it)")
			}
			sb := sandbox(t, "e2e-logflood-"+rt, &client.SandboxOptions{Runtime: rt})
			before := fileSize(t, d.LogPath)
			out := strings.TrimSpace(mustExec(t, sb, logFlood))
			grew := fileSize(t, d.LogPath) - before
			t.Logf("%s: %s of 250 requests refused; hutchd's log grew by %d bytes", rt, out, grew)
			if n, err := strconv.Atoi(out); err != nil || n < 200 {
				t.Fatalf("flood output %q; want at least 200 refused requests (the attack must have run)", out)
			}
			if grew >= 256<<10 {
				t.Errorf("hutchd's log grew by %d bytes; want less than 256 KiB", grew)
			}
			if tail := d.LogTail(); !strings.Contains(tail, "bytes cut]") {
				t.Errorf("no cut value in hutchd's log tail; its last bytes:\n%s", tail[max(0, len(tail)-600):])
			}
		})
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
