package rootfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/hutchdev/hutch/internal/testutil"
)

func TestUnescape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/a/b", "/a/b"},
		{`/a\040b`, "/a b"},
		{`/tab\011x`, "/tab\tx"},
		{`/back\134slash`, `/back\slash`},
		{`/trailing\04`, `/trailing\04`},
	} {
		if got := unescape(tc.in); got != tc.want {
			t.Errorf("unescape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMountRejectsRelativeAndCommaPaths(t *testing.T) {
	dir := t.TempDir()
	if err := Mount("lower", dir+"/u", dir+"/w", dir+"/m"); err == nil {
		t.Error("relative lower accepted")
	}
	if err := Mount(dir, dir+"/u,x", dir+"/w", dir+"/m"); err == nil {
		t.Error("comma in upper accepted")
	}
	if err := Mount(filepath.Join(dir, "missing"), dir+"/u", dir+"/w", dir+"/m"); err == nil {
		t.Error("missing lower accepted")
	}
}

func TestOverlayMount(t *testing.T) {
	testutil.RequiresRoot(t, "mount overlayfs")
	dir := t.TempDir()
	lower, upper, work, merged := filepath.Join(dir, "lower"), filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "merged")
	if err := os.MkdirAll(lower, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lower, "base.txt"), []byte("base"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Mount(lower, upper, work, merged); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Unmount(merged) })

	if ok, err := IsMounted(merged); err != nil || !ok {
		t.Fatalf("IsMounted(merged) = %v, %v; want true", ok, err)
	}
	if ok, err := IsMounted(lower); err != nil || ok {
		t.Fatalf("IsMounted(lower) = %v, %v; want false", ok, err)
	}
	got, err := ListMounts(dir)
	if err != nil || len(got) != 1 || got[0] != merged {
		t.Fatalf("ListMounts(%s) = %v, %v; want [%s]", dir, got, err, merged)
	}

	if b, err := os.ReadFile(filepath.Join(merged, "base.txt")); err != nil || string(b) != "base" {
		t.Fatalf("read through overlay = %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(merged, "base.txt"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(merged, "new.txt"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}

	if err := Unmount(merged); err != nil {
		t.Fatal(err)
	}
	if ok, _ := IsMounted(merged); ok {
		t.Fatal("still mounted after Unmount")
	}
	if err := Unmount(merged); err != nil {
		t.Fatalf("second Unmount: %v", err)
	}
	if err := Unmount(filepath.Join(dir, "never-existed")); err != nil {
		t.Fatalf("Unmount of missing path: %v", err)
	}

	for path, want := range map[string]string{
		filepath.Join(lower, "base.txt"): "base",
		filepath.Join(upper, "base.txt"): "changed",
		filepath.Join(upper, "new.txt"):  "new",
	} {
		if b, err := os.ReadFile(path); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", path, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(lower, "new.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("new.txt leaked into lower: %v", err)
	}
}

func TestUnmountBusyFallsBackToDetach(t *testing.T) {
	testutil.RequiresRoot(t, "mount overlayfs")
	dir := t.TempDir()
	lower := filepath.Join(dir, "lower")
	merged := filepath.Join(dir, "merged")
	if err := os.MkdirAll(lower, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Mount(lower, filepath.Join(dir, "upper"), filepath.Join(dir, "work"), merged); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Unmount(merged) })
	// An open file keeps the mount busy.
	f, err := os.Create(filepath.Join(merged, "held"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Unmount(merged); err != nil {
		t.Fatal(err)
	}
	if ok, _ := IsMounted(merged); ok {
		t.Fatal("still mounted after Unmount of busy mount")
	}
}
