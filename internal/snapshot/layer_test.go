package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/archive"
	"github.com/hutchdev/hutch/internal/idmap"
	"github.com/hutchdev/hutch/internal/testutil"
)

func requireRoot(t *testing.T) {
	t.Helper()
	testutil.RequiresRoot(t, "whiteouts (mknod), chown and trusted.* xattrs")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// upperTree builds a small overlay upper directory: files with owners and modes, a symlink, a
// hard link, a whiteout and an opaque directory (the layer format itself is
// internal/archive's to test).
func upperTree(t *testing.T, dir string) {
	t.Helper()
	w := func(p, content string, mode uint32) {
		p = filepath.Join(dir, p)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o600))
		must(t, unix.Chmod(p, mode))
	}
	w("workspace/a.txt", "alpha\n", 0o640)
	w("usr/local/bin/tool", "#!/bin/sh\n", 0o4755)
	must(t, os.Chown(filepath.Join(dir, "workspace/a.txt"), 1234, 5678))
	must(t, os.Symlink("a.txt", filepath.Join(dir, "workspace/link")))
	must(t, os.Link(filepath.Join(dir, "workspace/a.txt"), filepath.Join(dir, "workspace/hard")))
	must(t, os.MkdirAll(filepath.Join(dir, "etc"), 0o755))
	must(t, unix.Mknod(filepath.Join(dir, "etc/motd"), unix.S_IFCHR, 0)) // whiteout
	must(t, os.MkdirAll(filepath.Join(dir, "opt/app"), 0o751))
	must(t, unix.Setxattr(filepath.Join(dir, "opt/app"), "trusted.overlay.opaque", []byte("y"), 0))
	w("opt/app/new", "new\n", 0o644)
}

// A layer of a sandbox with a user namespace records in-sandbox owners (idmap's SandboxOwner,
// which capture passes): host IDs of its range shifted back, anything else as the overflow ID.
// The same tree in two ranges gives one layer.
func TestLayerShiftsOwners(t *testing.T) {
	requireRoot(t)
	layer := func(m idmap.Map) (map[string][2]int, [32]byte) {
		src := t.TempDir()
		files := []struct {
			name     string
			uid, gid int // in the sandbox; -1: host root (outside the range)
		}{{"root-file", 0, 0}, {"user-file", 1000, 1000}, {"mixed", 1000, 5}, {"host-root", -1, -1}}
		for _, f := range files {
			p := filepath.Join(src, f.name)
			must(t, os.WriteFile(p, []byte(f.name), 0o644))
			uid, gid := 0, 0
			if f.uid >= 0 {
				uid, gid = int(m.Base)+f.uid, int(m.Base)+f.gid
			}
			must(t, os.Lchown(p, uid, gid))
			must(t, os.Chtimes(p, time.Unix(1, 0), time.Unix(1, 0)))
		}
		var buf bytes.Buffer
		_, err := archive.WriteLayer(context.Background(), &buf, src, archive.LayerOptions{Owner: m.SandboxOwner()})
		must(t, err)
		owners := map[string][2]int{}
		tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			owners[h.Name] = [2]int{h.Uid, h.Gid}
		}
		return owners, sha256.Sum256(buf.Bytes())
	}
	a, da := layer(idmap.Map{Base: 1 << 20, Size: 1 << 16})
	b, db := layer(idmap.Map{Base: 1<<20 + 1<<16, Size: 1 << 16})
	want := map[string][2]int{"root-file": {0, 0}, "user-file": {1000, 1000}, "mixed": {1000, 5}, "host-root": {idmap.Overflow, idmap.Overflow}}
	for name, w := range want {
		if a[name] != w || b[name] != w {
			t.Errorf("%s: owners %v and %v, want %v", name, a[name], b[name], w)
		}
	}
	if da != db {
		t.Error("the same tree in two ranges gave different layers")
	}
}
