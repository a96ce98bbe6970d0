package sandbox

import (
	"context"
	"log/slog"
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

// TestRecoverWake: a memory wake that hutchd's death cut short keeps its image for the next
// wake when nothing ran from it; the image is dropped, with a sleep note saying why, only when
// the restored sandbox ran or the image or its agent binary is gone.
func TestRecoverWake(t *testing.T) {
	for _, c := range []struct {
		name                   string
		ran, noImage, noBinary bool
		wantMode, wantNote     string
	}{
		{"never ran", false, false, false, SleepModeMemory, ""},
		{"ran", true, false, false, SleepModeDisk, "after the sandbox had resumed"},
		{"image gone", false, true, false, SleepModeDisk, "memory image of the interrupted wake is unreadable"},
		{"agent binary gone", false, false, true, SleepModeDisk, "agent binary of the memory image is gone"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &Manager{log: slog.New(slog.DiscardHandler)}
			m.cfg.DataDir = t.TempDir()
			id := "s"
			if err := os.MkdirAll(m.memoryDir(id), 0o700); err != nil {
				t.Fatal(err)
			}
			if !c.noImage {
				if err := os.WriteFile(filepath.Join(m.memoryDir(id), "checkpoint.img"), []byte("image"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			bin := filepath.Join(t.TempDir(), "hutch-init")
			if !c.noBinary {
				if err := os.WriteFile(bin, []byte("bin"), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.writeSleepRecord(id, sleepRecord{Mode: SleepModeMemory, AgentBin: bin, Restoring: true}); err != nil {
				t.Fatal(err)
			}
			if !m.wakeInFlight(id) {
				t.Fatal("wakeInFlight = false for a record marked restoring")
			}
			m.recoverWake(context.Background(), store.Sandbox{ID: id}, c.ran)
			sr, ok := m.readSleepRecord(id)
			if !ok || sr.Mode != c.wantMode || sr.Restoring || !strings.Contains(sr.Note, c.wantNote) {
				t.Fatalf("sleep record after recoverWake = %+v, %v; want mode %s, note containing %q, not restoring", sr, ok, c.wantMode, c.wantNote)
			}
			_, err := os.Stat(m.memoryDir(id))
			if kept := err == nil; kept != (c.wantMode == SleepModeMemory) {
				t.Errorf("memory image kept = %v; want %v", kept, c.wantMode == SleepModeMemory)
			}
			if m.wakeInFlight(id) {
				t.Error("wakeInFlight = true after recoverWake")
			}
		})
	}
}
