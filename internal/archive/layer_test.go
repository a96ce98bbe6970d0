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
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/rootfs"
	"github.com/hutchdev/hutch/internal/testutil"
)

func requireLayerRoot(t *testing.T) {
	t.Helper()
	testutil.RequiresRoot(t, "whiteouts (mknod), chown and trusted.* xattrs")
}

// upperTree builds what an overlay upper directory holds after a sandbox's changes: files with
// odd modes and owners, a symlink, hard links, a FIFO, a whiteout, an opaque directory, user
// and capability xattrs, nanosecond mtimes.
func upperTree(t *testing.T, dir string) {
	t.Helper()
	w := func(p, content string, mode os.FileMode) {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, p), []byte(content), mode))
		must(t, os.Chmod(filepath.Join(dir, p), mode))
	}
	w("workspace/a.txt", "alpha\n", 0o640)
	w("workspace/big.bin", strings.Repeat("0123456789abcdef", 100000), 0o644)
	w("workspace/empty", "", 0o600)
	w("usr/local/bin/tool", "#!/bin/sh\n", 0o4755)
	must(t, os.Chown(filepath.Join(dir, "workspace/a.txt"), 1234, 5678))
	must(t, os.Chmod(filepath.Join(dir, "usr/local/bin/tool"), 0o4755)) // after chown-free setup
	must(t, os.Symlink("a.txt", filepath.Join(dir, "workspace/link")))
	must(t, os.Lchown(filepath.Join(dir, "workspace/link"), 42, 43))
	must(t, os.Link(filepath.Join(dir, "workspace/a.txt"), filepath.Join(dir, "workspace/hard")))
	must(t, unix.Mkfifo(filepath.Join(dir, "workspace/fifo"), 0o620))
	must(t, os.MkdirAll(filepath.Join(dir, "etc"), 0o755))
	must(t, unix.Mknod(filepath.Join(dir, "etc/motd"), unix.S_IFCHR, 0)) // whiteout
	must(t, os.MkdirAll(filepath.Join(dir, "opt/app"), 0o751))
	must(t, unix.Setxattr(filepath.Join(dir, "opt/app"), "trusted.overlay.opaque", []byte("y"), 0))
	must(t, unix.Setxattr(filepath.Join(dir, "opt/app"), "trusted.overlay.origin", []byte("junk"), 0)) // dropped
	w("opt/app/new", "new\n", 0o644)
	must(t, unix.Setxattr(filepath.Join(dir, "workspace/a.txt"), "user.note", []byte("bin\x00ary"), 0))
	must(t, os.MkdirAll(filepath.Join(dir, "var/empty-dir"), 0o1777))
	must(t, os.Chmod(filepath.Join(dir, "var/empty-dir"), 0o1777))
	ts := time.Unix(1700000000, 123456789)
	must(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		return unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{unix.NsecToTimespec(ts.UnixNano()), unix.NsecToTimespec(ts.UnixNano())}, unix.AT_SYMLINK_NOFOLLOW)
	}))
}

// manifest describes every entry of a tree: type, mode, owner, mtime, size, content hash,
// symlink target, kept xattrs, and which entries share an inode.
func manifest(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	inodes := map[uint64]string{}
	must(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		var st unix.Stat_t
		must(t, unix.Lstat(p, &st))
		line := fmt.Sprintf("%s type=%o mode=%o own=%d:%d mtime=%d.%09d rdev=%d", rel, st.Mode&unix.S_IFMT, st.Mode&0o7777, st.Uid, st.Gid, st.Mtim.Sec, st.Mtim.Nsec, st.Rdev)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, _ := os.ReadFile(p)
			line += fmt.Sprintf(" size=%d sha=%x", len(b), sha256.Sum256(b))
			if first, ok := inodes[st.Ino]; ok {
				line += " hardlink-of=" + first
			} else {
				inodes[st.Ino] = rel
			}
		case unix.S_IFLNK:
			target, _ := os.Readlink(p)
			line += " -> " + target
		}
		xa, err := readXattrs(p)
		must(t, err)
		var keys []string
		for k, v := range xa {
			keys = append(keys, fmt.Sprintf("%s=%q", k, v))
		}
		sort.Strings(keys)
		lines = append(lines, line+" "+strings.Join(keys, ","))
		return nil
	}))
	return strings.Join(lines, "\n")
}

func TestLayerRoundTrip(t *testing.T) {
	requireLayerRoot(t)
	src := t.TempDir()
	upperTree(t, src)
	var a, b bytes.Buffer
	stats, err := WriteLayer(context.Background(), &a, src, LayerOptions{})
	must(t, err)
	if _, err := WriteLayer(context.Background(), &b, src, LayerOptions{}); err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(a.Bytes()) != sha256.Sum256(b.Bytes()) {
		t.Fatal("two tars of one tree differ: not deterministic")
	}
	if stats.Entries < 15 || stats.Skipped != 0 {
		t.Errorf("stats = %+v", stats)
	}
	dst := t.TempDir()
	must(t, ExtractLayer(bytes.NewReader(a.Bytes()), dst))
	want, got := manifest(t, src), manifest(t, dst)
	// The dropped overlay attribute is the only difference.
	want = strings.ReplaceAll(want, `,SCHILY.xattr.trusted.overlay.origin="junk"`, "")
	if got != want {
		t.Errorf("extracted tree differs\n got:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(got, "workspace/hard") || !strings.Contains(got, "hardlink-of=workspace/a.txt") {
		t.Errorf("hard link lost:\n%s", got)
	}
	// Re-archiving the extracted tree gives the same digest: the digest is the tree's.
	var c bytes.Buffer
	_, err = WriteLayer(context.Background(), &c, dst, LayerOptions{})
	must(t, err)
	if sha256.Sum256(c.Bytes()) != sha256.Sum256(a.Bytes()) {
		t.Error("digest of the extracted tree differs from the original's")
	}
	// A tar entry of the whiteout is a 0/0 character device; the opaque marker is a PAX record.
	tr := tar.NewReader(bytes.NewReader(a.Bytes()))
	seen := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		seen[h.Name] = h
	}
	if h := seen["etc/motd"]; h == nil || h.Typeflag != tar.TypeChar || h.Devmajor != 0 || h.Devminor != 0 {
		t.Errorf("whiteout entry = %+v", h)
	}
	if h := seen["opt/app/"]; h == nil || h.PAXRecords["SCHILY.xattr.trusted.overlay.opaque"] != "y" {
		t.Errorf("opaque dir entry = %+v", h)
	}
}

// The extracted layer works as an overlay lower layer: its whiteout hides an image file, its
// opaque directory hides the image directory's content, its files show through.
func TestLayerAsOverlayLower(t *testing.T) {
	requireLayerRoot(t)
	base := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(base, "etc"), 0o755))
	must(t, os.WriteFile(filepath.Join(base, "etc/motd"), []byte("hello"), 0o644))
	must(t, os.WriteFile(filepath.Join(base, "etc/keep"), []byte("keep"), 0o644))
	must(t, os.MkdirAll(filepath.Join(base, "opt/app"), 0o755))
	must(t, os.WriteFile(filepath.Join(base, "opt/app/old"), []byte("old"), 0o644))
	src := t.TempDir()
	upperTree(t, src)
	var buf bytes.Buffer
	_, err := WriteLayer(context.Background(), &buf, src, LayerOptions{})
	must(t, err)
	layer := t.TempDir()
	must(t, ExtractLayer(&buf, layer))
	mnt := t.TempDir()
	merged, upper, work := filepath.Join(mnt, "m"), filepath.Join(mnt, "u"), filepath.Join(mnt, "w")
	must(t, rootfs.Mount(rootfs.JoinLower(layer, base), upper, work, merged))
	defer rootfs.Unmount(merged)
	if _, err := os.Lstat(filepath.Join(merged, "etc/motd")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("whited-out etc/motd: %v", err)
	}
	if _, err := os.Stat(filepath.Join(merged, "etc/keep")); err != nil {
		t.Errorf("etc/keep: %v", err)
	}
	if _, err := os.Stat(filepath.Join(merged, "opt/app/old")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("opaque dir shows old content: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(merged, "opt/app/new")); err != nil || string(b) != "new\n" {
		t.Errorf("opt/app/new = %q, %v", b, err)
	}
	var st1, st2 unix.Stat_t
	must(t, unix.Stat(filepath.Join(merged, "workspace/a.txt"), &st1))
	must(t, unix.Stat(filepath.Join(merged, "workspace/hard"), &st2))
	if st1.Ino != st2.Ino || st1.Uid != 1234 || st1.Gid != 5678 {
		t.Errorf("a.txt/hard: ino %d/%d owner %d:%d", st1.Ino, st2.Ino, st1.Uid, st1.Gid)
	}
}

func TestExtractLayerRefusesEscapes(t *testing.T) {
	requireLayerRoot(t)
	cases := []struct {
		name    string
		entries []tar.Header
	}{
		{"dotdot", []tar.Header{{Name: "../evil", Typeflag: tar.TypeReg}}},
		{"absolute", []tar.Header{{Name: "/evil", Typeflag: tar.TypeReg}}},
		{"through symlink", []tar.Header{{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/tmp"}, {Name: "l/evil", Typeflag: tar.TypeReg}}},
		{"missing parent", []tar.Header{{Name: "nodir/evil", Typeflag: tar.TypeReg}}},
		{"device", []tar.Header{{Name: "sda", Typeflag: tar.TypeBlock, Devmajor: 8}}},
		{"char device", []tar.Header{{Name: "mem", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 1}}},
		{"hard link outside", []tar.Header{{Name: "h", Typeflag: tar.TypeLink, Linkname: "../../etc/passwd"}}},
		{"duplicate", []tar.Header{{Name: "d", Typeflag: tar.TypeDir, Mode: 0o755}, {Name: "d", Typeflag: tar.TypeSymlink, Linkname: "/"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, h := range c.entries {
				h.Format = tar.FormatPAX
				must(t, tw.WriteHeader(&h))
			}
			must(t, tw.Close())
			dir := t.TempDir()
			if err := ExtractLayer(bytes.NewReader(buf.Bytes()), filepath.Join(dir, "x")); err == nil {
				// x does not exist: even the first entry must fail or be refused.
				t.Fatal("extraction into a missing dir succeeded")
			}
			must(t, os.Mkdir(filepath.Join(dir, "x"), 0o700))
			if err := ExtractLayer(bytes.NewReader(buf.Bytes()), filepath.Join(dir, "x")); err == nil {
				t.Fatal("extraction succeeded")
			}
			if _, err := os.Lstat(filepath.Join(dir, "evil")); err == nil {
				t.Fatal("escaped")
			}
		})
	}
}

// A directory mount's view replaces the directory's content in the layer, written opaque.
func TestWriteLayerMounts(t *testing.T) {
	src := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(src, "workspace/app/sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "workspace/app/hidden"), []byte("under the mount"), 0o644))
	must(t, os.WriteFile(filepath.Join(src, "workspace/other"), []byte("kept"), 0o644))
	view := t.TempDir()
	must(t, os.Chmod(view, 0o750))
	must(t, os.MkdirAll(filepath.Join(view, "lib"), 0o755))
	must(t, os.WriteFile(filepath.Join(view, "lib/index.js"), []byte("module.exports = 1"), 0o644))
	var buf bytes.Buffer
	_, err := WriteLayer(context.Background(), &buf, src, LayerOptions{Mounts: map[string]string{"/workspace/app": view, "/workspace/missing": view}})
	must(t, err)
	tr := tar.NewReader(&buf)
	seen := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		seen[h.Name] = h
	}
	want := []string{"workspace/", "workspace/app/", "workspace/app/lib/", "workspace/app/lib/index.js", "workspace/other"}
	if len(seen) != len(want) {
		t.Errorf("entries = %v, want %v", keys(seen), want)
	}
	for _, n := range want {
		if seen[n] == nil {
			t.Errorf("missing %s (have %v)", n, keys(seen))
		}
	}
	if h := seen["workspace/app/"]; h == nil || h.PAXRecords["SCHILY.xattr.trusted.overlay.opaque"] != "y" || h.Mode&0o777 != 0o750 {
		t.Errorf("mount dir entry = %+v, want opaque with the view's mode 0750", h)
	}
}

func keys(m map[string]*tar.Header) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// LayerOptions.Owner maps the owners a layer records; without it owners are recorded as stat
// reports them.
func TestLayerOwner(t *testing.T) {
	requireLayerRoot(t)
	src := t.TempDir()
	p := filepath.Join(src, "f")
	must(t, os.WriteFile(p, []byte("x"), 0o644))
	must(t, os.Lchown(p, 1<<20+1000, 1<<20+5))
	owner := func(opts LayerOptions) [2]int {
		var buf bytes.Buffer
		_, err := WriteLayer(context.Background(), &buf, src, opts)
		must(t, err)
		h, err := tar.NewReader(&buf).Next()
		must(t, err)
		return [2]int{h.Uid, h.Gid}
	}
	if got := owner(LayerOptions{}); got != [2]int{1<<20 + 1000, 1<<20 + 5} {
		t.Errorf("unmapped owner %v", got)
	}
	shift := func(uid, gid int) (int, int) { return uid - 1<<20, gid - 1<<20 }
	if got := owner(LayerOptions{Owner: shift}); got != [2]int{1000, 5} {
		t.Errorf("mapped owner %v; want [1000 5]", got)
	}
}
