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
	"github.com/hutchdev/hutch/internal/testutil"
)

var names = []Name{
	{"state directory", "/var/lib/hutch", "--state-dir", false},
	{"cgroup parent", "hutch", "--cgroup-parent", false},
	{"netns prefix", "hutch-", "--netns-prefix", true},
	{"veth prefix", "hsb", "--if-prefix", true},
	{"nftables table", "hutch", "--nft-table", false},
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
					n.Value = "two" + n.Value
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
	n := Name{"cgroup parent", "hutch", "--cgroup-parent", false}
	// Blocking, not -n: the probe's Take below may hold the lock at the moment flock(1) tries,
	// and a non-blocking flock(1) would then exit and never hold it.
	holder := exec.Command("flock", "--no-fork", filepath.Join(dir, fileName(n)), "sleep", "1000")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { holder.Wait(); close(done) }()
	t.Cleanup(func() { holder.Process.Kill(); <-done })
	// Wait for flock(1) to hold it.
	if !testutil.Poll(t, 10*time.Millisecond, 10*time.Second, func() bool {
		c, err := Take(dir, []Name{n})
		if err != nil {
			if !errdefs.IsCode(err, errdefs.CodeUnavailable) {
				t.Fatal(err)
			}
			return true
		}
		c.Release()
		return false
	}) {
		t.Fatal("flock(1) never held the claim")
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
		{Name{Kind: "cgroup parent", Value: "hutch"}, "cgroup-parent.hutch"},
		{Name{Kind: "netns prefix", Value: "hutch-"}, "netns-prefix.hutch-"},
		{Name{Kind: "state directory", Value: "/var/lib/hutch"}, "state-directory.41db3345e2ca0d66a0cdb2d6"},
	} {
		if got := fileName(tc.n); got != tc.want {
			t.Errorf("fileName(%+v) = %q; want %q", tc.n, got, tc.want)
		}
	}
	if a, b := fileName(Name{Kind: "state directory", Value: "/a/b"}), fileName(Name{Kind: "state directory", Value: "/a.b"}); a == b || strings.Contains(a, "/") {
		t.Errorf("state directory files %q, %q: want distinct, without a slash", a, b)
	}
}

// TestTakeRefusesOverlappingPrefixes: a netns or veth prefix that starts, or is the start of,
// one another daemon holds is refused (each would sweep the other's names); a prefix that only
// shares letters is not, nor one whose holder is gone.
func TestTakeRefusesOverlappingPrefixes(t *testing.T) {
	dir := t.TempDir()
	held, err := Take(dir, []Name{{"netns prefix", "hutch-", "--netns-prefix", true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		value string
		ok    bool
	}{
		{"hutch", false},      // sweeps "hutch-…"
		{"hutch-e2e-", false}, // swept by "hutch-"
		{"h", false},
		{"hutche2e-", true},
		{"hutcx-", true},
	} {
		c, err := Take(dir, []Name{{"netns prefix", tc.value, "--netns-prefix", true}})
		if tc.ok {
			if err != nil {
				t.Errorf("Take(%q) beside \"hutch-\" = %v; want it granted", tc.value, err)
				continue
			}
			c.Release()
			continue
		}
		if err == nil {
			c.Release()
			t.Errorf("Take(%q) beside \"hutch-\" succeeded; want a refusal", tc.value)
			continue
		}
		if !errdefs.IsCode(err, errdefs.CodeUnavailable) || !strings.Contains(err.Error(), `overlaps "hutch-"`) || !strings.Contains(err.Error(), "--netns-prefix") {
			t.Errorf("Take(%q) = %v; want UNAVAILABLE naming the overlap and the flag", tc.value, err)
		}
		// The refused Take holds nothing: its own name is free again.
		if c, err := Take(dir, []Name{{"cgroup parent", tc.value, "", false}}); err != nil {
			t.Errorf("after the refusal of %q: %v", tc.value, err)
		} else {
			c.Release()
		}
	}
	// Another kind with an overlapping value is no conflict.
	if c, err := Take(dir, []Name{{"veth prefix", "hutch", "--if-prefix", true}}); err != nil {
		t.Errorf("a veth prefix beside a netns prefix: %v", err)
	} else {
		c.Release()
	}
	// Once its holder is gone, an overlapping prefix is granted (its file stays behind).
	held.Release()
	if c, err := Take(dir, []Name{{"netns prefix", "hutch", "--netns-prefix", true}}); err != nil {
		t.Errorf("Take after the holder released: %v", err)
	} else {
		c.Release()
	}
}
