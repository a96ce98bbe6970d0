package idmap

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/internal/testutil"
)

// TestContainerUserNS checks that the namespace a container joins is owned by its range's
// root (so the kernel charges its per-user counters there, not to host root), carries the
// range, and that making it leaves every thread of this process root again, also when several
// are made at once.
func TestContainerUserNS(t *testing.T) {
	testutil.RequiresRoot(t, "user namespaces with arbitrary mappings")
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Skip("needs nsenter to look inside the namespace")
	}
	holder, err := exec.LookPath("true")
	if err != nil {
		t.Skip("needs a true binary as the namespace's holder")
	}
	maps := []Map{{Base: 1<<20 + 7<<16, Size: 1 << 16}, {Base: 1<<20 + 8<<16, Size: 1 << 16}, {Base: 1<<20 + 9<<16, Size: 1 << 10}}
	var wg sync.WaitGroup
	for _, m := range maps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns, err := m.ContainerUserNS(holder)
			if err != nil {
				t.Errorf("range %d: %v", m.Base, err)
				return
			}
			defer ns.Close()
			if owner, err := Owner(ns); err != nil || owner != int(m.Base) {
				t.Errorf("range %d: owner %d (%v), want %d", m.Base, owner, err, m.Base)
			}
			cmd := exec.Command(nsenter, "--user=/proc/self/fd/3", "cat", "/proc/self/uid_map", "/proc/self/gid_map")
			cmd.ExtraFiles = []*os.File{ns}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("range %d: nsenter: %v: %s", m.Base, err, out)
				return
			}
			f := strings.Fields(string(out))
			want := []string{"0", itoa(m.Base), itoa(m.Size)}
			if len(f) != 6 || strings.Join(f[:3], " ") != strings.Join(want, " ") || strings.Join(f[3:], " ") != strings.Join(want, " ") {
				t.Errorf("range %d: maps %q, want %v twice", m.Base, out, want)
			}
		}()
	}
	wg.Wait()
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 5 && (f[0] == "Uid:" || f[0] == "Gid:") && strings.Join(f[1:], " ") != "0 0 0 0" {
				t.Errorf("%s: %s after making namespaces, want root's IDs", p, line)
			}
		}
	}
	// A holder the range's root may not execute (root's 0700 copy) is refused as such.
	private := filepath.Join(t.TempDir(), "true")
	if b, err := os.ReadFile(holder); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(private, b, 0o700); err != nil {
		t.Fatal(err)
	}
	if ns, err := maps[0].ContainerUserNS(private); !errors.Is(err, os.ErrPermission) {
		if ns != nil {
			ns.Close()
		}
		t.Errorf("holder of mode 0700: %v, want a permission error", err)
	}
	if _, err := (Map{Base: 0, Size: 10}).ContainerUserNS(holder); err == nil {
		t.Error("a container namespace owned by host root was made")
	}
}

func itoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
