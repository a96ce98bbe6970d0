package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/testutil"
)

// goldenTree builds a fixed tree with every kind of entry either writer handles: modes with
// setuid and sticky bits, owners, nanosecond mtimes, a symlink, hard links, a FIFO, a whiteout,
// an opaque directory, kept and dropped xattrs, written zeros and a sparse file. The tree is
// the same on every run, so the bytes of its archives are too. It skips the test where the file
// system cannot hold such a tree (no holes, no user xattrs).
func goldenTree(t *testing.T) string {
	t.Helper()
	testutil.RequiresRoot(t, "fixed owners, a whiteout (mknod) and trusted.* xattrs")
	root := filepath.Join(t.TempDir(), "tree")
	file := func(p string, content []byte, mode uint32, uid, gid int) {
		p = filepath.Join(root, p)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, content, 0o600))
		must(t, os.Lchown(p, uid, gid))
		must(t, unix.Chmod(p, mode))
	}
	must(t, os.Mkdir(root, 0o750))
	must(t, os.Lchown(root, 10, 20))
	file("a.txt", []byte("alpha\n"), 0o640, 1234, 5678)
	must(t, os.Link(filepath.Join(root, "a.txt"), filepath.Join(root, "hard")))
	if err := unix.Setxattr(filepath.Join(root, "a.txt"), "user.note", []byte("bin\x00ary"), 0); err != nil {
		t.Skipf("user xattrs: %v", err)
	}
	file("bin/tool", []byte("#!/bin/sh\n"), 0o4755, 0, 0)
	file("big.bin", []byte(strings.Repeat("0123456789abcdef", 100_000)), 0o644, 1000, 1000)
	file("zeros.bin", make([]byte, 3<<20), 0o644, 1000, 1000)
	file("empty", nil, 0o600, 0, 0)
	must(t, os.Symlink("a.txt", filepath.Join(root, "link")))
	must(t, os.Lchown(filepath.Join(root, "link"), 42, 43))
	must(t, unix.Mkfifo(filepath.Join(root, "fifo"), 0o620))
	must(t, os.Chmod(filepath.Join(root, "fifo"), 0o620))
	must(t, os.Mkdir(filepath.Join(root, "etc"), 0o755))
	must(t, unix.Mknod(filepath.Join(root, "etc/motd"), unix.S_IFCHR, 0))
	must(t, os.MkdirAll(filepath.Join(root, "opt/app"), 0o751))
	must(t, os.Chmod(filepath.Join(root, "opt/app"), 0o751))
	must(t, unix.Setxattr(filepath.Join(root, "opt/app"), "trusted.overlay.opaque", []byte("y"), 0))
	must(t, unix.Setxattr(filepath.Join(root, "opt/app"), "trusted.overlay.origin", []byte("junk"), 0))
	file("opt/app/new", []byte("new\n"), 0o644, 0, 0)
	must(t, os.MkdirAll(filepath.Join(root, "var/tmp"), 0o755))
	must(t, unix.Chmod(filepath.Join(root, "var/tmp"), 0o1777))

	sp := filepath.Join(root, "disk.img")
	f, err := os.OpenFile(sp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	must(t, err)
	for _, off := range []int64{0, 5 << 20, 64<<20 - 4096} {
		b := bytes.Repeat([]byte{byte(off>>20) + 1}, 4096)
		_, err := f.WriteAt(b, off)
		must(t, err)
	}
	must(t, f.Close())
	var st unix.Stat_t
	must(t, unix.Stat(sp, &st))
	if st.Blocks*512 > 1<<20 {
		t.Skipf("the temp dir's file system does not keep holes (%d bytes allocated)", st.Blocks*512)
	}

	ts := unix.NsecToTimespec(time.Unix(1700000000, 123456789).UnixNano())
	// Deepest first: setting an entry's time must not be undone by its children.
	var paths []string
	must(t, filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		paths = append(paths, p)
		return err
	}))
	for _, p := range slices.Backward(paths) {
		must(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW))
	}
	return root
}

// headers lists every entry of a tar stream with the header fields the writers set, and the
// SHA-256 of its content.
func headers(t *testing.T, b []byte) string {
	t.Helper()
	var lines []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		must(t, err)
		sum := sha256.New()
		_, err = io.Copy(sum, tr)
		must(t, err)
		var recs []string
		for k, v := range h.PAXRecords {
			if k != "mtime" { // in ModTime
				recs = append(recs, fmt.Sprintf("%s=%q", k, v))
			}
		}
		slices.Sort(recs)
		lines = append(lines, fmt.Sprintf("%q type=%q mode=%o own=%d:%d names=%q:%q mtime=%d dev=%d:%d size=%d link=%q format=%v pax=[%s] sha=%x",
			h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime.UnixNano(), h.Devmajor, h.Devminor,
			h.Size, h.Linkname, h.Format, strings.Join(recs, " "), sum.Sum(nil)[:6]))
	}
	return strings.Join(lines, "\n")
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// A backup archive of a fixed tree has fixed bytes: these are the headers and the digest the
// tree's archive has always had, so a change of the writer that changes them is a format
// change, not a refactoring.
func TestWriteGolden(t *testing.T) {
	root := goldenTree(t)
	var buf bytes.Buffer
	st, err := Write(context.Background(), &buf, root, Options{})
	must(t, err)
	got := headers(t, buf.Bytes())
	if got != goldenTreeHeaders {
		t.Errorf("headers changed:\n%s\nwant:\n%s", got, goldenTreeHeaders)
	}
	if d := digest(buf.Bytes()); d != goldenTreeDigest {
		t.Errorf("digest %s, want %s", d, goldenTreeDigest)
	}
	want := Stats{Files: 7, Dirs: 7, Symlinks: 1, HardLinks: 1, Skipped: 2, Bytes: 64<<20 + 3<<20 + 1_600_000 + 6 + 10 + 4}
	if st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
}

const goldenTreeHeaders = `"./" type='5' mode=750 own=10:20 names="":"" mtime=1700000000000000000 dev=0:0 size=0 link="" format=USTAR pax=[] sha=e3b0c44298fc
"a.txt" type='0' mode=640 own=1234:5678 names="":"" mtime=1700000000000000000 dev=0:0 size=6 link="" format=USTAR pax=[] sha=b6a98d9ce9a2
"big.bin" type='0' mode=644 own=1000:1000 names="":"" mtime=1700000000000000000 dev=0:0 size=1600000 link="" format=USTAR pax=[] sha=39ec05ee6a2d
"bin/" type='5' mode=755 own=0:0 names="":"" mtime=1700000000000000000 dev=0:0 size=0 link="" format=USTAR pax=[] sha=e3b0c44298fc
"bin/tool" type='0' mode=4755 own=0:0 names="":"" mtime=1700000000000000000 dev=0:0 size=10 link="" format=USTAR pax=[] sha=a8076d3d28d2
"disk.img" type='0' mode=644 own=0:0 names="":"" mtime=1700000000000000000 dev=0:0 size=12288 link="" format=PAX pax=[HUTCH.sparse.map="0,4096,5242880,4096,67104768,4096" HUTCH.sparse.size="67108864"] sha=8b0b2c901cc4
"empty" type='0' mode=600 own=0:0 names="":"" mtime=1700000000000000000 dev=0:0 size=0 link="" format=USTAR pax=[] sha=e3b0c44298fc
"etc/" type='5' mode=755 own=0:0 names="":"" mtime=1700000000000000000 dev=0:0 size=0 link="" format=USTAR pax=[] sha=e3b0c44298fc
"hard" type='1' mode=640 own=1234:5678 names="":"" mtime=1700000000000000000 dev=0:0 size=0 link="a.txt" format=USTAR pax=[] sha=e3b0c44298fc
"link" type='2' mode=777 own=42:43 names="":"" mtime=1700000000000000000 dev=0:0 size=0 link="a.txt" format=USTAR pax=[] sha=e3b0c44298fc
"opt/" type='5' mode=751 own=0:0 names="":"" mtime=1700000000000000000 dev=0:0 size=0 link="" format=USTAR pax=[] sha=e3b0c44298fc
"opt/app/" type='5' mode=751 own=0:0 names="":"" mtime=1700000000000000000 dev=0:0 size=0 link="" format=USTAR pax=[] sha=e3b0c44298fc
"opt/app/new" type='0' mode=644 own=0:0 names="":"" mtime=1700000000000000000 dev=0:0 size=4 link="" format=USTAR pax=[] sha=7aa7a5359173
"var/" type='5' mode=755 own=0:0 names="":"" mtime=1700000000000000000 dev=0:0 size=0 link="" format=USTAR pax=[] sha=e3b0c44298fc
"var/tmp/" type='5' mode=1777 own=0:0 names="":"" mtime=1700000000000000000 dev=0:0 size=0 link="" format=USTAR pax=[] sha=e3b0c44298fc
"zeros.bin" type='0' mode=644 own=1000:1000 names="":"" mtime=1700000000000000000 dev=0:0 size=3145728 link="" format=USTAR pax=[] sha=bbd05cf6097a`

const goldenTreeDigest = "12e9023b6d9a2e496efa2995eced28b090602b5ab6c62e3d0a788d3e2e101c06"

// A layer of a fixed tree has fixed bytes: these are the headers and the digest the tree's
// layer has always had (a layer's digest names it in the blob store), so a change of the
// writer that changes them is a format change, not a refactoring.
func TestWriteLayerGolden(t *testing.T) {
	root := goldenTree(t)
	var buf bytes.Buffer
	st, err := WriteLayer(context.Background(), &buf, root, LayerOptions{})
	must(t, err)
	got := headers(t, buf.Bytes())
	if got != goldenLayerHeaders {
		t.Errorf("headers changed:\n%s\nwant:\n%s", got, goldenLayerHeaders)
	}
	if d := digest(buf.Bytes()); d != goldenLayerDigest {
		t.Errorf("digest %s, want %s", d, goldenLayerDigest)
	}
	if want := (LayerStats{Entries: 17}); st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
}

const goldenLayerHeaders = `"a.txt" type='0' mode=640 own=1234:5678 names="":"" mtime=1700000000123456789 dev=0:0 size=6 link="" format=PAX pax=[SCHILY.xattr.user.note="bin\x00ary"] sha=b6a98d9ce9a2
"big.bin" type='0' mode=644 own=1000:1000 names="":"" mtime=1700000000123456789 dev=0:0 size=1600000 link="" format=PAX pax=[] sha=39ec05ee6a2d
"bin/" type='5' mode=755 own=0:0 names="":"" mtime=1700000000123456789 dev=0:0 size=0 link="" format=PAX pax=[] sha=e3b0c44298fc
"bin/tool" type='0' mode=4755 own=0:0 names="":"" mtime=1700000000123456789 dev=0:0 size=10 link="" format=PAX pax=[] sha=a8076d3d28d2
"disk.img" type='0' mode=644 own=0:0 names="":"" mtime=1700000000123456789 dev=0:0 size=12288 link="" format=PAX pax=[HUTCH.sparse.map="0,4096,5242880,4096,67104768,4096" HUTCH.sparse.size="67108864"] sha=8b0b2c901cc4
"empty" type='0' mode=600 own=0:0 names="":"" mtime=1700000000123456789 dev=0:0 size=0 link="" format=PAX pax=[] sha=e3b0c44298fc
"etc/" type='5' mode=755 own=0:0 names="":"" mtime=1700000000123456789 dev=0:0 size=0 link="" format=PAX pax=[] sha=e3b0c44298fc
"etc/motd" type='3' mode=0 own=0:0 names="":"" mtime=1700000000123456789 dev=0:0 size=0 link="" format=PAX pax=[] sha=e3b0c44298fc
"fifo" type='6' mode=620 own=0:0 names="":"" mtime=1700000000123456789 dev=0:0 size=0 link="" format=PAX pax=[] sha=e3b0c44298fc
"hard" type='1' mode=640 own=1234:5678 names="":"" mtime=1700000000123456789 dev=0:0 size=0 link="a.txt" format=PAX pax=[] sha=e3b0c44298fc
"link" type='2' mode=777 own=42:43 names="":"" mtime=1700000000123456789 dev=0:0 size=0 link="a.txt" format=PAX pax=[] sha=e3b0c44298fc
"opt/" type='5' mode=751 own=0:0 names="":"" mtime=1700000000123456789 dev=0:0 size=0 link="" format=PAX pax=[] sha=e3b0c44298fc
"opt/app/" type='5' mode=751 own=0:0 names="":"" mtime=1700000000123456789 dev=0:0 size=0 link="" format=PAX pax=[SCHILY.xattr.trusted.overlay.opaque="y"] sha=e3b0c44298fc
"opt/app/new" type='0' mode=644 own=0:0 names="":"" mtime=1700000000123456789 dev=0:0 size=4 link="" format=PAX pax=[] sha=7aa7a5359173
"var/" type='5' mode=755 own=0:0 names="":"" mtime=1700000000123456789 dev=0:0 size=0 link="" format=PAX pax=[] sha=e3b0c44298fc
"var/tmp/" type='5' mode=1777 own=0:0 names="":"" mtime=1700000000123456789 dev=0:0 size=0 link="" format=PAX pax=[] sha=e3b0c44298fc
"zeros.bin" type='0' mode=644 own=1000:1000 names="":"" mtime=1700000000123456789 dev=0:0 size=3145728 link="" format=PAX pax=[] sha=bbd05cf6097a`

const goldenLayerDigest = "e3c789f71c97721f39187e2cac060c6c3333f279b89dca1d21936f98536516c9"
