package rootfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/hutchdev/hutch/internal/testutil"
)

// OpenDir resolves inside the root: symlinks the sandbox planted never reach the host.
func TestOpenDirStaysInRoot(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	host := filepath.Join(dir, "host") // stands for the host's files outside the root
	for _, d := range []string{root + "/workspace", host} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"workspace/abs":  "/",                         // absolute: the sandbox's own root
		"workspace/up":   "../../../../../../" + host, // climbs out: clamped at the root
		"workspace/loop": "loop",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		dir, want string
		fail      bool
	}{
		{dir: "/workspace/app", want: "/workspace/app"},
		{dir: "/workspace/abs/x/y", want: "/x/y"},
		{dir: "/workspace/up/z", fail: true}, // re-rooted inside root, where it leads nowhere
		{dir: "/workspace/loop/a", fail: true},
	} {
		f, got, err := OpenDir(root, tc.dir, true)
		if tc.fail {
			if err == nil {
				f.Close()
				t.Errorf("OpenDir(%s) succeeded", tc.dir)
			}
			continue
		}
		if err != nil {
			t.Errorf("OpenDir(%s): %v", tc.dir, err)
			continue
		}
		f.Close()
		if got != tc.want {
			t.Errorf("OpenDir(%s) resolved to %s, want %s", tc.dir, got, tc.want)
		}
		if _, err := os.Stat(filepath.Join(root, got)); err != nil {
			t.Errorf("OpenDir(%s) did not create %s inside the root: %v", tc.dir, got, err)
		}
	}
	// Re-rooted: the same target inside root exists now.
	if err := os.MkdirAll(filepath.Join(root, host), 0o755); err != nil {
		t.Fatal(err)
	}
	if f, got, err := OpenDir(root, "/workspace/up/z", true); err != nil || got != host+"/z" {
		t.Errorf("OpenDir through a climbing symlink = %s, %v; want %s/z inside the root", got, err, host)
	} else {
		f.Close()
	}
	if ents, _ := os.ReadDir(host); len(ents) != 0 {
		t.Errorf("something was created on the host side: %v", ents)
	}
	if _, _, err := OpenDir(root, "/missing/dir", false); !errors.Is(err, fs.ErrNotExist) && err == nil {
		t.Errorf("OpenDir without create of a missing dir: %v", err)
	}
	if _, _, err := OpenDir(root, "relative", true); err == nil {
		t.Error("relative dir accepted")
	}
}

// A directory mount shows lower below a writable upper, and UnmountDir removes it.
func TestMountDir(t *testing.T) {
	testutil.RequiresRoot(t, "mount overlayfs")
	dir := t.TempDir()
	lower, upper, work := filepath.Join(dir, "lower"), filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	root := filepath.Join(dir, "root")
	for _, d := range []string{lower, root + "/workspace"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(lower, "f"), []byte("from backup"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(lower, 0o750); err != nil {
		t.Fatal(err)
	}
	f, _, err := OpenDir(root, "/workspace/app", true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isRoot, err := IsMountRoot(f); err != nil || isRoot {
		t.Fatalf("IsMountRoot before mount = %v, %v", isRoot, err)
	}
	if err := MountDir(f, "hutch-test", lower, upper, work); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(root, "workspace/app")
	defer Unmount(mp)
	if b, err := os.ReadFile(filepath.Join(mp, "f")); err != nil || string(b) != "from backup" {
		t.Fatalf("read through the mount: %q, %v", b, err)
	}
	if fi, err := os.Stat(mp); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("mounted dir mode = %v, %v; want lower's 0750", fi.Mode(), err)
	}
	if err := os.WriteFile(filepath.Join(mp, "g"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(upper, "g")); err != nil {
		t.Errorf("write did not land in upper: %v", err)
	}
	if _, err := os.Stat(filepath.Join(lower, "g")); err == nil {
		t.Error("write reached the read-only tree")
	}
	// A read-only view of upper over lower reads the same content, without the mount.
	view := filepath.Join(dir, "view")
	if err := MountReadOnly([]string{upper, lower}, view); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(view)
	Unmount(view)
	if len(ents) != 2 {
		t.Errorf("view has %d entries, want 2", len(ents))
	}
	g, _, err := OpenDir(root, "/workspace/app", false)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if isRoot, err := IsMountRoot(g); err != nil || !isRoot {
		t.Fatalf("IsMountRoot after mount = %v, %v", isRoot, err)
	}
	if err := UnmountDir(g); err != nil {
		t.Fatal(err)
	}
	if m, _ := IsMounted(mp); m {
		t.Error("still mounted after UnmountDir")
	}
	if _, err := os.Stat(filepath.Join(mp, "f")); err == nil {
		t.Error("tree still visible after UnmountDir")
	}
}
