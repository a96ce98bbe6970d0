package watch

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

func TestJournal(t *testing.T) {
	m := newTestManager(t, Config{MaxTracked: 2})
	root := filepath.Join(t.TempDir(), "j")
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	check := func(since, want string) string {
		t.Helper()
		c, err := m.Check(root, since)
		if err != nil {
			t.Fatal(err)
		}
		if c.Status != want {
			t.Fatalf("Check(%q) = %s (%s), want %s", since, c.Status, c.Version, want)
		}
		return c.Version
	}
	v0 := check("", StatusResync)
	if v := check(v0, StatusUnchanged); v != v0 {
		t.Errorf("unchanged moved the version: %s → %s", v0, v)
	}
	write(t, filepath.Join(root, "sub", "f"), "x")
	v1 := check(v0, StatusChanged)
	check(v1, StatusUnchanged)
	check(v0, StatusChanged) // an older version is still known
	check("", StatusResync)
	check("garbage", StatusResync)
	check("v1.0000000000000000.1.0", StatusResync) // another boot
	other := NewManager(Config{Roots: []string{os.TempDir()}, Logger: slog.New(slog.DiscardHandler)})
	defer other.Close()
	if c, err := other.Check(root, v1); err != nil || c.Status != StatusResync {
		t.Errorf("another agent: %+v %v", c, err)
	}
	// Excluded paths do not count.
	if err := os.Mkdir(filepath.Join(root, "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "node_modules", "x"), "x")
	check(v1, StatusUnchanged)
	// Bounded: tracking two more paths drops this one, whose versions then resync.
	for range 2 {
		d := t.TempDir()
		if _, err := m.Check(d, ""); err != nil {
			t.Fatal(err)
		}
	}
	if m.Tracked() != 2 {
		t.Errorf("Tracked = %d, want 2", m.Tracked())
	}
	v3 := check(v1, StatusResync)
	// Deleting the directory: changed once, then FILE_NOT_FOUND.
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	check(v3, StatusChanged)
	if _, err := m.Check(root, v3); !errdefs.IsCode(err, errdefs.CodeFileNotFound) || !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Check of a deleted dir: %v", err)
	}
}
