package treecache

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func valid(k string) bool { return strings.HasPrefix(k, "k-") }

func TestCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.MkdirAll(filepath.Join(dir, ".tmp-left-by-a-crash", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := Open(dir, valid)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("cache dir mode = %v, %v; want 0700", fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".tmp-left-by-a-crash")); err == nil {
		t.Error("Open left a crash's temp directory")
	}
	fill := func(key, content string) {
		t.Helper()
		unlock := c.Lock(key)
		defer unlock()
		tmp, err := c.TempDir()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, "f"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := c.Adopt(key, tmp); err != nil {
			t.Fatal(err)
		}
	}
	if c.Has("k-a") || c.Touch("k-a") {
		t.Fatal("empty cache has k-a")
	}
	fill("k-a", "first")
	fill("k-a", "second") // an entry already there wins; the new copy is dropped
	if b, _ := os.ReadFile(filepath.Join(c.Path("k-a"), "f")); string(b) != "first" {
		t.Errorf("k-a holds %q, want the first copy", b)
	}
	fill("k-b", "b")
	if err := os.WriteFile(filepath.Join(dir, "not-an-entry"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Only unused entries older than minAge go.
	old := time.Now().Add(-time.Hour)
	for _, k := range []string{"k-a", "k-b"} {
		if err := os.Chtimes(c.Path(k), old, old); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := c.GC(context.Background(), map[string]bool{"k-b": true}, time.Minute)
	if err != nil || len(removed) != 1 || removed[0] != "k-a" {
		t.Fatalf("GC = %v, %v; want [k-a]", removed, err)
	}
	if !c.Has("k-b") || c.Has("k-a") {
		t.Error("GC removed the wrong entries")
	}
	if !c.Touch("k-b") {
		t.Fatal("Touch(k-b) = false")
	}
	if removed, _ := c.GC(context.Background(), nil, time.Minute); len(removed) != 0 {
		t.Errorf("GC removed a recently used entry: %v", removed)
	}
	if _, err := os.Stat(filepath.Join(dir, "not-an-entry")); err != nil {
		t.Error("GC touched a name that is not an entry")
	}
	if err := c.Remove("k-b"); err != nil || c.Has("k-b") {
		t.Errorf("Remove(k-b) = %v, still there: %v", err, c.Has("k-b"))
	}
	if err := c.Remove("k-missing"); err != nil {
		t.Errorf("Remove of a missing entry: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}
