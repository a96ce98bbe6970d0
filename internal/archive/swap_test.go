package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

// archiveOf returns the tar of src.
func archiveOf(t *testing.T, src string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := Write(context.Background(), &buf, src, Options{}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// setHook sets afterMoveOut for the test.
func setHook(t *testing.T, f func(dir string)) {
	afterMoveOut = f
	t.Cleanup(func() { afterMoveOut = nil })
}

// overlayWorkspace mounts an overlay whose /workspace comes from the lower layer (it cannot be
// renamed, like a sandbox's), with precious files in lower directories and in the upper layer.
func overlayWorkspace(t *testing.T) (merged, ws string) {
	t.Helper()
	requireRoot(t)
	base := t.TempDir()
	lower, upper, work := filepath.Join(base, "lower"), filepath.Join(base, "upper"), filepath.Join(base, "work")
	for i := range 50 {
		writeFile(t, filepath.Join(lower, fmt.Sprintf("workspace/imagedir/sub/precious%d", i)), "from the image", 0o644)
	}
	writeFile(t, filepath.Join(lower, "workspace/top"), "from the image", 0o644)
	for _, d := range []string{upper, work} {
		must(t, os.MkdirAll(d, 0o755))
	}
	merged = filepath.Join(base, "merged")
	mount(t, "overlay", "overlay", merged, fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work))
	ws = filepath.Join(merged, "workspace")
	if err := os.Rename(ws, filepath.Join(merged, "probe")); err == nil {
		must(t, os.Rename(filepath.Join(merged, "probe"), ws))
		t.Skip("this kernel renames lower directories (redirect_dir): the per-entry swap is not exercised")
	} else if !errors.Is(err, syscall.EXDEV) {
		t.Fatalf("rename probe: %v", err)
	}
	for i := range 150 {
		writeFile(t, filepath.Join(ws, fmt.Sprintf("mine/precious%d", i)), "user data", 0o600)
	}
	return merged, ws
}

// A swap that fails after the old entries were moved out (another process made a directory
// the archive also has) puts everything back: the target is exactly as it was, image
// directories included, and no work directory is left.
func TestSwapFailureRollsBack(t *testing.T) {
	merged, ws := overlayWorkspace(t)
	src := filepath.Join(t.TempDir(), "src")
	writeFile(t, filepath.Join(src, "zzz/f"), "new", 0o644)
	writeFile(t, filepath.Join(src, "mine/other"), "new", 0o644)
	data := archiveOf(t, src)
	before := snapshot(t, ws)

	setHook(t, func(dir string) { must(t, os.MkdirAll(filepath.Join(dir, "zzz/x"), 0o755)) })
	_, err := Extract(context.Background(), bytes.NewReader(data), ws)
	if errdefs.CodeOf(err) != errdefs.CodeFileExists {
		t.Fatalf("Extract with a concurrent mkdir = %v; want FILE_EXISTS", err)
	}
	// What the other process made stays; everything else is as it was.
	must(t, os.RemoveAll(filepath.Join(ws, "zzz")))
	diff(t, before, snapshot(t, ws))
	noWorkDirs(t, merged)
	noWorkDirs(t, ws)

	// Without the interference the same restore works.
	setHook(t, nil)
	if _, err := Extract(context.Background(), bytes.NewReader(data), ws); err != nil {
		t.Fatal(err)
	}
	diff(t, snapshot(t, src), snapshot(t, ws))
	noWorkDirs(t, merged)
}

// When putting the old content back fails too, the work directory is kept, named in the
// error, and a later Extract does not remove it.
func TestSwapRollbackFailureKeepsOld(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	mnt := filepath.Join(base, "mnt")
	mount(t, "tmpfs", "tmpfs", mnt, "size=16m") // a mount point: the per-entry swap
	writeFile(t, filepath.Join(mnt, "keepdir/precious"), "user data", 0o644)
	src := filepath.Join(base, "src")
	writeFile(t, filepath.Join(src, "zzz"), "new", 0o644)
	data := archiveOf(t, src)

	setHook(t, func(dir string) {
		writeFile(t, filepath.Join(dir, "zzz"), "in the way", 0o644)     // the swap fails
		writeFile(t, filepath.Join(dir, "keepdir"), "in the way", 0o644) // and keepdir cannot go back
	})
	_, err := Extract(context.Background(), bytes.NewReader(data), mnt)
	var ee *errdefs.Error
	if !errors.As(err, &ee) || ee.Code != errdefs.CodeFileExists {
		t.Fatalf("Extract = %v; want FILE_EXISTS", err)
	}
	kept, _ := ee.Context["kept"].(string)
	if kept == "" || !strings.Contains(ee.Message, kept) {
		t.Fatalf("error %q, context %v: want the kept directory named", ee.Message, ee.Context)
	}
	if b, err := os.ReadFile(filepath.Join(kept, "keepdir/precious")); err != nil || string(b) != "user data" {
		t.Fatalf("kept content: %q, %v", b, err)
	}
	// A later Extract (which removes stale work directories) leaves it alone.
	setHook(t, nil)
	must(t, os.Remove(filepath.Join(mnt, "keepdir")))
	must(t, os.Remove(filepath.Join(mnt, "zzz")))
	if _, err := Extract(context.Background(), bytes.NewReader(data), mnt); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(kept, "keepdir/precious")); err != nil || string(b) != "user data" {
		t.Fatalf("kept content after another Extract: %q, %v", b, err)
	}
}

// removeStale removes only work directories that are provably Extract's own and hold no user
// data.
func TestRemoveStale(t *testing.T) {
	base := t.TempDir()
	dst := filepath.Join(base, "dst")
	writeFile(t, filepath.Join(dst, "keep"), "x", 0o644)

	abandoned, err := newWork(base, "dst") // an Extract killed while extracting
	must(t, err)
	writeFile(t, filepath.Join(abandoned.newTree(), "partial"), "x", 0o644)
	swapping, err := newWork(base, "dst") // killed while swapping: "old" may be the only copy
	must(t, err)
	writeFile(t, filepath.Join(swapping.oldTree(), "precious"), "user data", 0o644)
	must(t, swapping.setPhase(phaseSwapping))
	userDir := filepath.Join(base, ".hutch-restore-dst-mine") // the user's own, same pattern
	writeFile(t, filepath.Join(userDir, "precious"), "user data", 0o644)
	forged := filepath.Join(base, ".hutch-restore-dst-copy") // a marker naming another directory
	must(t, os.MkdirAll(forged, 0o755))
	b, err := os.ReadFile(filepath.Join(abandoned.path, stateName))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(forged, stateName), b, 0o600))
	oldStyle := filepath.Join(base, ".hutch-restore-dst-123.old") // a previous version's
	writeFile(t, filepath.Join(oldStyle, "precious"), "user data", 0o644)

	src := filepath.Join(base, "src")
	writeFile(t, filepath.Join(src, "f"), "new", 0o644)
	roundTrip(t, src, dst, Options{})
	if _, err := os.Stat(abandoned.path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the abandoned work directory was not removed: %v", err)
	}
	for _, p := range []string{filepath.Join(swapping.oldTree(), "precious"), filepath.Join(userDir, "precious"),
		filepath.Join(forged, stateName), filepath.Join(oldStyle, "precious")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}

// A target with a mount point below it is refused before anything is touched.
func TestExtractRefusesMountBelow(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	dst := filepath.Join(base, "dst")
	writeFile(t, filepath.Join(dst, "keep"), "x", 0o644)
	mount(t, "tmpfs", "tmpfs", filepath.Join(dst, "sub/mnt"), "size=1m")
	writeFile(t, filepath.Join(dst, "sub/mnt/inside"), "x", 0o644)
	before := snapshot(t, dst)
	src := filepath.Join(base, "src")
	writeFile(t, filepath.Join(src, "f"), "new", 0o644)
	_, err := Extract(context.Background(), bytes.NewReader(archiveOf(t, src)), dst)
	var ee *errdefs.Error
	if !errors.As(err, &ee) || ee.Code != errdefs.CodeInvalidBackupConfig || ee.Context["mountPoint"] != filepath.Join(dst, "sub/mnt") {
		t.Fatalf("Extract = %v; want INVALID_BACKUP_CONFIG naming the mount point", err)
	}
	diff(t, before, snapshot(t, dst))
	noWorkDirs(t, base)
}

func TestResolveDir(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	must(t, os.MkdirAll(filepath.Join(root, "real"), 0o755))
	must(t, os.MkdirAll(filepath.Join(base, "outside"), 0o755))
	must(t, os.Symlink(filepath.Join(base, "outside"), filepath.Join(root, "out")))
	must(t, os.Symlink("real", filepath.Join(root, "in")))
	must(t, os.Symlink("/", filepath.Join(root, "rootlink")))
	must(t, os.Symlink(filepath.Join(base, "nowhere"), filepath.Join(root, "dangling")))
	roots := []string{root}
	for _, c := range []struct {
		dir, want string
		code      errdefs.Code
	}{
		{root, root, ""},
		{filepath.Join(root, "real/new/deeper"), filepath.Join(root, "real/new/deeper"), ""},
		{filepath.Join(root, "in/x"), filepath.Join(root, "real/x"), ""},
		{filepath.Join(root, "out"), "", errdefs.CodeInvalidBackupConfig},
		{filepath.Join(root, "out/apt"), "", errdefs.CodeInvalidBackupConfig},
		{filepath.Join(root, "rootlink/etc"), "", errdefs.CodeInvalidBackupConfig},
		{filepath.Join(root, "dangling/x"), "", errdefs.CodeInvalidBackupConfig},
		{filepath.Join(root, "dangling"), "", errdefs.CodeInvalidBackupConfig},
	} {
		got, err := ResolveDir(c.dir, roots)
		if errdefs.CodeOf(err) != c.code || (c.code == "" && (err != nil || got != c.want)) {
			t.Errorf("ResolveDir(%s) = %q, %v; want %q, %q", c.dir, got, err, c.want, c.code)
		}
	}
	// A root that is itself a symlink allows its target.
	link := filepath.Join(base, "rootlink")
	must(t, os.Symlink(root, link))
	if got, err := ResolveDir(filepath.Join(link, "real"), []string{link}); err != nil || got != filepath.Join(root, "real") {
		t.Errorf("through a root symlink: %q, %v", got, err)
	}
}
