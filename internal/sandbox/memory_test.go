package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/store"
)

// cgroupRuntime is a runtime whose containers' cgroup directories are dirs.
type cgroupRuntime struct {
	namedRuntime
	dirs []string
}

func (c cgroupRuntime) CgroupDirs(string) []string { return c.dirs }

func TestCgroupMemory(t *testing.T) {
	v1, v2, none := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(v1, "memory.usage_in_bytes"), []byte("12345\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v2, "memory.current"), []byte("678\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "memory.current"), []byte("max\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		dirs []string
		want int64
	}{
		{"v1", []string{v1}, 12345},
		{"v2", []string{v2}, 678},
		{"first that has it", []string{none, bad, v1}, 12345},
		{"none", []string{none, filepath.Join(none, "missing")}, -1},
		{"no dirs", nil, -1},
	} {
		if got := cgroupMemory(c.dirs); got != c.want {
			t.Errorf("%s: cgroupMemory = %d, want %d", c.name, got, c.want)
		}
	}
}

// TestImageRoom: a memory image that would leave less than the reserve free is refused with
// the figures; the cgroup's reading counts, else the instance type's memory.
func TestImageRoom(t *testing.T) {
	m := &Manager{}
	m.cfg.DataDir = t.TempDir()
	if err := os.MkdirAll(m.sandboxDir("s"), 0o700); err != nil {
		t.Fatal(err)
	}
	huge := t.TempDir()
	if err := os.WriteFile(filepath.Join(huge, "memory.current"), []byte("1152921504606846976\n"), 0o600); err != nil { // 2^60
		t.Fatal(err)
	}
	rec := store.Sandbox{ID: "s", InstanceType: "lite"}
	note := m.imageRoom(cgroupRuntime{dirs: []string{huge}}, rec)
	if !strings.Contains(note, "not enough free space for a memory image") || !strings.Contains(note, "1099511627776 MiB needed") {
		t.Errorf("2^60 bytes of memory: note %q", note)
	}
	// Without a cgroup reading: the instance type's memory (lite: 256 MiB).
	note = m.imageRoom(namedRuntime{name: "x"}, rec)
	if note != "" && !strings.Contains(note, "256 MiB needed") {
		t.Errorf("lite without a reading: note %q", note)
	}
	if note := m.imageRoom(namedRuntime{name: "x"}, store.Sandbox{ID: "s", InstanceType: "nope"}); !strings.Contains(note, "nope") {
		t.Errorf("unknown instance type: note %q", note)
	}
}
