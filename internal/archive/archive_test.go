package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

// node is what a tree comparison sees of one entry.
type node struct {
	typ      string
	mode     uint32
	uid, gid uint32
	mtime    int64 // seconds
	content  string
	target   string
	linkID   int // entries with the same non-zero linkID are one inode
}

// snapshot describes every entry below root (root itself as ".").
func snapshot(t *testing.T, root string) map[string]node {
	t.Helper()
	out := map[string]node{}
	inodes := map[uint64]int{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		n := node{mode: st.Mode & 0o7777, uid: st.Uid, gid: st.Gid, mtime: st.Mtim.Sec}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			n.typ = "dir"
		case unix.S_IFLNK:
			n.typ, n.mode, n.mtime = "symlink", 0, 0
			n.target, _ = os.Readlink(p)
		case unix.S_IFREG:
			n.typ = "file"
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n.content = fmt.Sprintf("%d bytes, sha256 %x", len(b), sha256.Sum256(b))
			if st.Nlink > 1 {
				if _, ok := inodes[st.Ino]; !ok {
					inodes[st.Ino] = len(inodes) + 1
				}
				n.linkID = inodes[st.Ino]
			}
		default:
			n.typ = "other"
		}
		if rel == "." {
			n.mtime = 0 // the top's mtime is restored too, but the test's own writes move it
		}
		out[filepath.ToSlash(rel)] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diff(t *testing.T, want, got map[string]node) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: missing", k)
			continue
		}
		if w != g {
			t.Errorf("%s: got %+v, want %+v", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected", k)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), mode))
	must(t, os.Chmod(p, mode))
}

// sampleTree builds a tree with every kind of entry an archive keeps.
func sampleTree(t *testing.T, root string) {
	t.Helper()
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	writeFile(t, filepath.Join(root, "a.txt"), "hello\n", 0o644)
	writeFile(t, filepath.Join(root, "bin/run.sh"), "#!/bin/sh\necho hi\n", 0o755)
	writeFile(t, filepath.Join(root, "secret"), "s3cret", 0o600)
	writeFile(t, filepath.Join(root, "suid"), "x", 0o644)
	must(t, unix.Chmod(filepath.Join(root, "suid"), 0o4755))
	writeFile(t, filepath.Join(root, "empty"), "", 0o644)
	writeFile(t, filepath.Join(root, "big.bin"), strings.Repeat("0123456789abcdef", 200_000), 0o644) // 3.2 MB
	must(t, os.MkdirAll(filepath.Join(root, "empty-dir"), 0o750))
	must(t, os.Chmod(filepath.Join(root, "empty-dir"), 0o750))
	must(t, os.MkdirAll(filepath.Join(root, "deep/er/est"), 0o755))
	writeFile(t, filepath.Join(root, "deep/er/est/leaf"), "leaf", 0o644)
	writeFile(t, filepath.Join(root, "ro/inside"), "in a read-only dir", 0o444)
	must(t, os.Chmod(filepath.Join(root, "ro"), 0o555))
	must(t, os.Symlink("a.txt", filepath.Join(root, "link-rel")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(root, "link-abs")))
	must(t, os.Symlink("nowhere", filepath.Join(root, "link-dangling")))
	must(t, os.Symlink("deep", filepath.Join(root, "link-dir")))
	must(t, os.Link(filepath.Join(root, "a.txt"), filepath.Join(root, "deep/hard-a")))
	must(t, os.Link(filepath.Join(root, "a.txt"), filepath.Join(root, "hard-a2")))
	if os.Geteuid() == 0 {
		must(t, os.Lchown(filepath.Join(root, "secret"), 1234, 5678))
		must(t, os.Lchown(filepath.Join(root, "link-rel"), 4321, 8765))
		must(t, os.Lchown(filepath.Join(root, "deep/er"), 99, 98))
	}
	must(t, os.Chtimes(filepath.Join(root, "secret"), old, old))
	must(t, os.Chtimes(filepath.Join(root, "deep/er"), old, old))
	ts := unix.NsecToTimespec(old.UnixNano())
	must(t, unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(root, "link-rel"), []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW))
}

// roundTrip archives src through a pipe into dst.
func roundTrip(t *testing.T, src, dst string, opts Options) (Stats, Stats) {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var wst Stats
	go func() {
		var err error
		wst, err = Write(context.Background(), pw, src, opts)
		pw.CloseWithError(err)
		done <- err
	}()
	xst, err := Extract(context.Background(), pr, dst)
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Write: %v", err)
	}
	return wst, xst
}

func noWorkDirs(t *testing.T, dir string) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, ".hutch-*"))
	if len(names) > 0 {
		t.Errorf("work directories left behind: %v", names)
	}
}

func TestRoundTrip(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	sampleTree(t, src)
	want := snapshot(t, src)

	// Into a new directory (parents created) and over an existing one with other content.
	fresh := filepath.Join(base, "new/parent/dst")
	wst, xst := roundTrip(t, src, fresh, Options{})
	diff(t, want, snapshot(t, fresh))
	if wst.Files != 8 || wst.HardLinks != 2 || wst.Symlinks != 4 || wst.Dirs != 7 || wst.Bytes != xst.Bytes {
		t.Errorf("write stats %+v, extract stats %+v", wst, xst)
	}
	if wst != (Stats{Files: xst.Files, Dirs: xst.Dirs, Symlinks: xst.Symlinks, HardLinks: xst.HardLinks, Bytes: xst.Bytes}) {
		t.Errorf("write stats %+v differ from extract stats %+v", wst, xst)
	}
	noWorkDirs(t, filepath.Dir(fresh))

	existing := filepath.Join(base, "existing")
	writeFile(t, filepath.Join(existing, "stale/file"), "must go", 0o644)
	writeFile(t, filepath.Join(existing, "a.txt"), "old content", 0o600)
	roundTrip(t, src, existing, Options{})
	diff(t, want, snapshot(t, existing))
	noWorkDirs(t, base)
}

func TestExcludes(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	for _, f := range []string{"keep.txt", "top.txt", "sub/top.txt", "node_modules/x/index.js", "pkg/node_modules/y.js",
		"debug.log", "sub/deep/trace.log", "build/a.o", "build/keep.c", "build/sub/b.o", "tmp/t", "sub/tmp", "exact/path/f", "exact/other"} {
		writeFile(t, filepath.Join(src, f), f, 0o644)
	}
	dst := filepath.Join(base, "dst")
	_, _ = roundTrip(t, src, dst, Options{
		Excludes: []string{"node_modules", "*.log", "build/*.o", "tmp/", "/top.txt"},
		Paths:    []string{"exact/path/"},
	})
	var got []string
	for k, n := range snapshot(t, dst) {
		if n.typ == "file" {
			got = append(got, k)
		}
	}
	slices.Sort(got)
	want := []string{"build/keep.c", "build/sub/b.o", "exact/other", "keep.txt", "sub/tmp", "sub/top.txt"}
	if !slices.Equal(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	if err := ValidatePatterns([]string{"[unclosed"}); errdefs.CodeOf(err) != errdefs.CodeInvalidArgument {
		t.Errorf("bad pattern: %v", err)
	}
}

// tarOf builds an archive from headers; a regular file's content is its name.
func tarOf(t *testing.T, hdrs ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		var body []byte
		if h.Typeflag == tar.TypeReg {
			body = []byte(h.Name)
			h.Size = int64(len(body))
		}
		must(t, tw.WriteHeader(&h))
		if len(body) > 0 {
			_, err := tw.Write(body)
			must(t, err)
		}
	}
	must(t, tw.Close())
	return buf.Bytes()
}

func TestExtractRefusesUnsafeEntries(t *testing.T) {
	reg := func(name string) tar.Header { return tar.Header{Name: name, Typeflag: tar.TypeReg} }
	cases := []struct {
		name string
		hdrs []tar.Header
	}{
		{"absolute", []tar.Header{reg("/etc/evil")}},
		{"dotdot", []tar.Header{reg("../evil")}},
		{"inner dotdot", []tar.Header{reg("a/../../evil")}},
		{"through symlink", []tar.Header{{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/tmp"}, reg("l/evil")}},
		{"through nested symlink", []tar.Header{{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}, {Name: "d/l", Typeflag: tar.TypeSymlink, Linkname: "../.."}, reg("d/l/x/evil")}},
		{"hard link outside", []tar.Header{{Name: "h", Typeflag: tar.TypeLink, Linkname: "../../etc/passwd"}}},
		{"hard link absolute", []tar.Header{{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}}},
		{"hard link to symlink", []tar.Header{{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, {Name: "h", Typeflag: tar.TypeLink, Linkname: "l"}}},
		{"hard link through symlink", []tar.Header{{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc"}, {Name: "h", Typeflag: tar.TypeLink, Linkname: "l/passwd"}}},
		{"char device", []tar.Header{{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}},
		{"block device", []tar.Header{{Name: "sda", Typeflag: tar.TypeBlock, Devmajor: 8}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			dst := filepath.Join(base, "dst")
			writeFile(t, filepath.Join(dst, "keep"), "original", 0o644)
			before := snapshot(t, dst)
			// A valid entry first, so the refusal comes mid-way.
			data := tarOf(t, append([]tar.Header{reg("first")}, c.hdrs...)...)
			_, err := Extract(context.Background(), bytes.NewReader(data), dst)
			if errdefs.CodeOf(err) != errdefs.CodeInvalidArgument || !strings.Contains(err.Error(), "unsafe archive entry") {
				t.Fatalf("Extract = %v; want an unsafe-entry VALIDATION_FAILED", err)
			}
			diff(t, before, snapshot(t, dst))
			noWorkDirs(t, base)
			if _, err := os.Lstat(filepath.Join(base, "evil")); err == nil {
				t.Error("an entry escaped the target")
			}
		})
	}
}

func TestExtractBadArchiveLeavesTarget(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	sampleTree(t, src)
	var buf bytes.Buffer
	if _, err := Write(context.Background(), &buf, src, Options{}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(base, "dst")
	writeFile(t, filepath.Join(dst, "keep"), "original", 0o644)
	before := snapshot(t, dst)
	for name, data := range map[string][]byte{
		"truncated": buf.Bytes()[:buf.Len()/2],
		"garbage":   bytes.Repeat([]byte("not a tar "), 200),
	} {
		_, err := Extract(context.Background(), bytes.NewReader(data), dst)
		if errdefs.CodeOf(err) != errdefs.CodeInvalidArgument {
			t.Errorf("%s: Extract = %v; want VALIDATION_FAILED", name, err)
		}
		diff(t, before, snapshot(t, dst))
		noWorkDirs(t, base)
	}
	// A cancelled context stops it too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Extract(ctx, bytes.NewReader(buf.Bytes()), dst); err == nil {
		t.Error("Extract with a cancelled context succeeded")
	}
	diff(t, before, snapshot(t, dst))
	noWorkDirs(t, base)
}

func TestWriteErrors(t *testing.T) {
	base := t.TempDir()
	writeFile(t, filepath.Join(base, "file"), "x", 0o644)
	for p, code := range map[string]errdefs.Code{
		filepath.Join(base, "missing"): errdefs.CodeFileNotFound,
		filepath.Join(base, "file"):    errdefs.CodeNotDirectory,
	} {
		if _, err := Write(context.Background(), io.Discard, p, Options{}); errdefs.CodeOf(err) != code {
			t.Errorf("Write(%s) = %v; want %s", p, err, code)
		}
	}
	if _, err := Extract(context.Background(), bytes.NewReader(nil), filepath.Join(base, "file")); errdefs.CodeOf(err) != errdefs.CodeNotDirectory {
		t.Errorf("Extract onto a file = %v; want NOT_DIRECTORY", err)
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	testutil.RequiresRoot(t, "mount tmpfs and overlayfs")
}

func mount(t *testing.T, fstype, src, target, opts string) {
	t.Helper()
	must(t, os.MkdirAll(target, 0o755))
	if err := unix.Mount(src, target, fstype, 0, opts); err != nil {
		t.Skipf("cannot mount %s: %v", fstype, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", target, err)
		}
	})
}

// A full disk while extracting: NO_SPACE, the target as it was, no work directory left.
func TestExtractNoSpace(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	src := filepath.Join(base, "src")
	writeFile(t, filepath.Join(src, "small"), "small", 0o644)
	writeFile(t, filepath.Join(src, "huge"), strings.Repeat("x", 3<<20), 0o644)
	mnt := filepath.Join(base, "tiny")
	mount(t, "tmpfs", "tmpfs", mnt, "size=1m")
	for _, dst := range []string{filepath.Join(mnt, "proj"), mnt} { // below the mount, and the mount point
		writeFile(t, filepath.Join(dst, "keep"), "original", 0o644)
		before := snapshot(t, dst)
		pr, pw := io.Pipe()
		go func() {
			_, err := Write(context.Background(), pw, src, Options{})
			pw.CloseWithError(err)
		}()
		_, err := Extract(context.Background(), pr, dst)
		pr.Close()
		if errdefs.CodeOf(err) != errdefs.CodeNoSpace {
			t.Fatalf("Extract into %s = %v; want NO_SPACE", dst, err)
		}
		diff(t, before, snapshot(t, dst))
		noWorkDirs(t, mnt)
		noWorkDirs(t, dst)
	}
	// With room, extracting into the mount point itself works (the swap keeps the directory).
	must(t, os.Remove(filepath.Join(src, "huge")))
	roundTrip(t, src, mnt, Options{})
	if b, err := os.ReadFile(filepath.Join(mnt, "small")); err != nil || string(b) != "small" {
		t.Errorf("small = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "keep")); err == nil {
		t.Error("old content survived the restore into the mount point")
	}
	noWorkDirs(t, mnt)
}

// Restoring into an overlayfs directory that comes from the lower layer (the sandbox's
// /workspace): it cannot be renamed (EXDEV), so the swap moves entries instead.
func TestExtractIntoOverlayLowerDir(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	lower, upper, work, merged := filepath.Join(base, "lower"), filepath.Join(base, "upper"), filepath.Join(base, "work"), filepath.Join(base, "merged")
	writeFile(t, filepath.Join(lower, "workspace/old/lowerfile"), "from the image", 0o644)
	writeFile(t, filepath.Join(lower, "workspace/top"), "from the image", 0o644)
	for _, d := range []string{upper, work} {
		must(t, os.MkdirAll(d, 0o755))
	}
	mount(t, "overlay", "overlay", merged, fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work))
	ws := filepath.Join(merged, "workspace")
	if err := os.Rename(ws, filepath.Join(merged, "probe")); err == nil {
		must(t, os.Rename(filepath.Join(merged, "probe"), ws))
		t.Log("this kernel renames lower directories (redirect_dir): the fallback is not exercised")
	} else if !errors.Is(err, syscall.EXDEV) {
		t.Fatalf("rename probe: %v", err)
	}
	src := filepath.Join(base, "src")
	sampleTree(t, src)
	want := snapshot(t, src)
	roundTrip(t, src, ws, Options{})
	diff(t, want, snapshot(t, ws))
	noWorkDirs(t, merged)
}

// A node_modules-like tree: many small files. Logs the times (no assertion on speed).
func TestLargeTree(t *testing.T) {
	if testing.Short() {
		t.Skip("large tree: skipped with -short")
	}
	base := t.TempDir()
	src := filepath.Join(base, "src")
	const nFiles = 40000
	content := strings.Repeat("module.exports = function () { return 42 }\n", 40) // ~1.7 KB
	for i := 0; i < nFiles; i++ {
		p := filepath.Join(src, fmt.Sprintf("node_modules/pkg%03d/lib/sub%d/file%d.js", i%400, i%7, i))
		if i%400 < 7 {
			must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			must(t, os.MkdirAll(filepath.Dir(p), 0o755))
			must(t, os.WriteFile(p, []byte(content), 0o644))
		}
	}
	var buf countWriter
	start := time.Now()
	st, err := Write(context.Background(), &buf, src, Options{})
	must(t, err)
	wdur := time.Since(start)
	if st.Files != nFiles {
		t.Fatalf("files = %d", st.Files)
	}
	dst := filepath.Join(base, "dst")
	start = time.Now()
	wst, xst := roundTrip(t, src, dst, Options{})
	rdur := time.Since(start)
	if xst.Files != nFiles || wst.Bytes != xst.Bytes {
		t.Fatalf("round trip: %+v %+v", wst, xst)
	}
	t.Logf("%d files, %d MB content, %d MB tar: archive to /dev/null %v; archive+extract through a pipe %v",
		nFiles, st.Bytes>>20, buf.n>>20, wdur.Round(time.Millisecond), rdur.Round(time.Millisecond))
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(b []byte) (int, error) { c.n += int64(len(b)); return len(b), nil }
