package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// TestSecondDaemonRefusesSharedNames starts a second hutchd beside the test daemon with names
// of its own but one: the test daemon's cgroup parent, netns prefix (or a prefix of it),
// nftables table or state directory. Each would let the second daemon's recovery take the first one's sandboxes for
// leftovers and kill them; each must make it exit at once with an error naming the resource
// and the flag, and the first daemon's sandbox keeps its process.
func TestSecondDaemonRefusesSharedNames(t *testing.T) {
	requireEnv(t)
	sb := sandbox(t, "e2e-claims", &client.SandboxOptions{InstanceType: "lite"})
	mustExec(t, sb, "nohup sleep 1003 >/dev/null 2>&1 &")
	own := map[string]string{
		"--state-dir":     "", // a temp dir, below
		"--cgroup-parent": "hutchclaim",
		"--netns-prefix":  "hutchclaim-",
		"--if-prefix":     "hcl",
		"--nft-table":     "hutchclaim",
	}
	const inUse = "is in use by another hutchd"
	for _, tc := range []struct {
		flag, value, kind, want string
	}{
		{"--cgroup-parent", cgroupDir, "cgroup parent", inUse},
		{"--netns-prefix", nsPrefix, "netns prefix", inUse},
		// A prefix of the test daemon's would sweep its namespaces too.
		{"--netns-prefix", strings.TrimSuffix(nsPrefix, "-"), "netns prefix", "overlaps"},
		{"--nft-table", nftTable, "nftables table", inUse},
		{"--state-dir", d.StateDir, "state directory", inUse},
	} {
		t.Run(tc.kind+" "+tc.value, func(t *testing.T) {
			args := []string{
				"--listen", "127.0.0.1:39411", "--preview-listen", "off", "--images-dir", imagesDir(),
				"--subnet", "10.86.0.0/16", "--dns-port", "39153", "--http-port", "39101", "--tls-port", "39102",
				"--data-volume", "off",
			}
			for flag, v := range own {
				if flag == "--state-dir" {
					v = t.TempDir()
				}
				if flag == tc.flag {
					v = tc.value
				}
				args = append(args, flag, v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bins, "hutchd"), args...)
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stderr, &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("the second hutchd did not exit within a minute:\n%s", stderr.String())
			}
			// slog quotes the message: match its parts.
			value := tc.value
			if s, err := filepath.EvalSymlinks(value); err == nil && tc.kind == "state directory" {
				value = s
			}
			out := stderr.String()
			for _, part := range []string{tc.kind, value, tc.want, tc.flag} {
				if err == nil || !strings.Contains(out, part) {
					t.Fatalf("second hutchd sharing %s: err %v, output:\n%s\nwant an exit naming %q", tc.flag, err, out, part)
				}
			}
			if ps := processes(t, sb); !strings.Contains(ps, "sleep 1003") {
				t.Fatalf("the first daemon's sandbox lost its process:\n%s", ps)
			}
		})
	}
	// Nothing of the refused daemons is left: their cgroup parent was never made.
	if dirs, _ := filepath.Glob("/sys/fs/cgroup/*/hutchclaim"); len(dirs) > 0 {
		t.Errorf("a refused daemon made cgroups: %v", dirs)
	}
	if _, err := os.Stat("/var/run/netns/hutchclaim-e2e-claims"); err == nil {
		t.Error("a refused daemon made a network namespace")
	}
}
