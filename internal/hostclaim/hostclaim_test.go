package hostclaim

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

var names = []Name{
	{"state directory", "/var/lib/hutch", "--state-dir"},
	{"cgroup parent", "hutch", "--cgroup-parent"},
	{"netns prefix", "hutch-", "--netns-prefix"},
	{"veth prefix", "hsb", "--if-prefix"},
	{"nftables table", "hutch", "--nft-table"},
}

// TestTakeRefusesHeldNames: while one daemon holds its names, a second daemon's Take of a set
// that shares any one of them fails, names the resource, the holder and the flag, and takes
// none of its other names; after Release the names are free again.
func TestTakeRefusesHeldNames(t *testing.T) {
	dir := t.TempDir()
	first, err := Take(dir, names)
	if err != nil {
		t.Fatal(err)
	}
	for i, shared := range names {
		t.Run(shared.Kind, func(t *testing.T) {
			// The second daemon's names: all its own but the shared one.
			var second []Name
			for j, n := range names {
				if j != i {
					n.Value += "-two"
				}
				second = append(second, n)
			}
			c, err := Take(dir, second)
			if err == nil {
				c.Release()
				t.Fatalf("Take of a set sharing the %s succeeded", shared.Kind)
			}
			msg := err.Error()
			if !errdefs.IsCode(err, errdefs.CodeUnavailable) || !strings.Contains(msg, shared.Kind) ||
				!strings.Contains(msg, shared.Flag) || !strings.Contains(msg, "process "+strconv.Itoa(os.Getpid())) {
				t.Fatalf("error = %v (%s); want UNAVAILABLE naming the %s, %s and pid %d", err, errdefs.CodeOf(err), shared.Kind, shared.Flag, os.Getpid())
			}
			// The failed Take holds none of its names: they can be taken now.
			c, err = Take(dir, second[:i])
			if err != nil {
				t.Fatalf("the names before the shared one stayed claimed: %v", err)
			}
			c.Release()
		})
	}
	first.Release()
	first.Release() // twice is fine
	again, err := Take(dir, names)
	if err != nil {
		t.Fatalf("Take after Release: %v", err)
	}
	again.Release()
}

// TestClaimDiesWithItsHolder: a claim held by another process ends when that process is
// killed with SIGKILL (no stale claim after a crash).
func TestClaimDiesWithItsHolder(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock(1) not installed")
	}
	dir := t.TempDir()
	n := Name{"cgroup parent", "hutch", "--cgroup-parent"}
	holder := exec.Command("flock", "--no-fork", "-n", filepath.Join(dir, fileName(n)), "sleep", "1000")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { holder.Wait(); close(done) }()
	t.Cleanup(func() { holder.Process.Kill(); <-done })
	// Wait for flock(1) to hold it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := Take(dir, []Name{n})
		if err != nil {
			if !errdefs.IsCode(err, errdefs.CodeUnavailable) {
				t.Fatal(err)
			}
			break
		}
		c.Release()
		if time.Now().After(deadline) {
			t.Fatal("flock(1) never held the claim")
		}
	}
	holder.Process.Kill()
	<-done
	c, err := Take(dir, []Name{n})
	if err != nil {
		t.Fatalf("Take after the holder died: %v", err)
	}
	c.Release()
}

func TestFileName(t *testing.T) {
	for _, tc := range []struct {
		n    Name
		want string
	}{
		{Name{"cgroup parent", "hutch", ""}, "cgroup-parent.hutch"},
		{Name{"netns prefix", "hutch-", ""}, "netns-prefix.hutch-"},
		{Name{"state directory", "/var/lib/hutch", ""}, "state-directory.41db3345e2ca0d66a0cdb2d6"},
	} {
		if got := fileName(tc.n); got != tc.want {
			t.Errorf("fileName(%+v) = %q; want %q", tc.n, got, tc.want)
		}
	}
	if a, b := fileName(Name{"state directory", "/a/b", ""}), fileName(Name{"state directory", "/a.b", ""}); a == b || strings.Contains(a, "/") {
		t.Errorf("state directory files %q, %q: want distinct, without a slash", a, b)
	}
}
