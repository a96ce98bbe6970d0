package archive

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/sparse"
)

// keptXattr reports whether an extended attribute travels in a layer: overlayfs's deletion
// markers (opaque directories, xattr whiteouts), user attributes, file capabilities and POSIX
// ACLs. Other trusted.overlay.* attributes (origin, impure, nlink, …) describe the upper
// directory's relation to its own lower layers and would be wrong anywhere else.
func keptXattr(name string) bool {
	switch name {
	case "trusted.overlay.opaque", "trusted.overlay.whiteout", "trusted.overlay.whiteouts",
		"security.capability", "system.posix_acl_access", "system.posix_acl_default":
		return true
	}
	return strings.HasPrefix(name, "user.")
}

// LayerStats counts what WriteLayer wrote.
type LayerStats struct {
	Entries int // tar entries (files, directories, links, whiteouts, …)
	Skipped int // device nodes (other than whiteouts) and sockets, which layers do not carry
}

// LayerOptions are what WriteLayer writes besides root's own tree, and how.
type LayerOptions struct {
	// Mounts maps directories inside the sandbox ("/workspace/app") to host directories that
	// hold their whole content (see WriteLayer).
	Mounts map[string]string
	// Owner, when set, maps each entry's numeric owner as stat reports it to the owner the
	// layer records (hutchd records a user namespace's host IDs as in-sandbox IDs). Nil
	// records the owner as it is.
	Owner func(uid, gid int) (int, int)
}

// WriteLayer writes the directory tree under root (an overlay upper directory) to w as a tar
// stream and reports what it wrote. root itself is not an entry. The stream is deterministic:
// entries in lexical path order, PAX format, no user or group names, no access or change
// times, so the same tree always gives the same bytes (and digest). Every entry keeps its
// mode (with setuid, setgid and sticky bits), numeric owner, modification time in nanoseconds
// and the extended attributes keptXattr accepts, as PAX "SCHILY.xattr.<name>" records. Files
// with several links are written once and then as hard links to the first path. Overlay
// whiteouts (character devices 0/0) are kept; other device nodes and sockets are skipped. A
// missing root is an empty layer. The tree must not change while it is written (the caller
// freezes the sandbox).
//
// A regular file with holes is written as a sparse entry (internal/sparse): its data extents
// only, found with SEEK_DATA/SEEK_HOLE, so a file's apparent size costs nothing to capture;
// ExtractLayer makes it sparse again. ctx is checked before every file and every MiB of
// content: a cancelled capture stops at once with ctx's error (its cause, when it has one).
//
// Where the walk of root meets a directory of opts.Mounts (the read-only view of a directory
// mount, sandbox.Disk), the directory is written opaque (it hides what the layers below hold
// there) with the view's attributes and content instead of root's. A mount whose directory is
// not in root is left out.
//
// opts.Owner maps the owners recorded (hutchd passes the sandbox's user namespace range, so a
// layer reads the same whichever range it came from).
func WriteLayer(ctx context.Context, w io.Writer, root string, opts LayerOptions) (LayerStats, error) {
	var stats LayerStats
	if _, err := os.Lstat(root); errors.Is(err, fs.ErrNotExist) {
		return stats, tar.NewWriter(w).Close()
	}
	lw := &layerWriter{
		tw:     tar.NewWriter(w),
		links:  map[[2]uint64]string{},
		buf:    make([]byte, bufSize),
		mounts: opts.Mounts,
		owner:  opts.Owner,
		check: func() error {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return nil
		},
	}
	if err := lw.tree(root, ""); err != nil {
		return lw.stats, fmt.Errorf("snapshot layer: %w", err)
	}
	return lw.stats, lw.tw.Close()
}

// layerWriter is one WriteLayer.
type layerWriter struct {
	tw     *tar.Writer
	links  map[[2]uint64]string // (dev, ino) → first path, for files with nlink > 1
	buf    []byte
	mounts map[string]string
	owner  func(uid, gid int) (int, int) // LayerOptions.Owner
	stats  LayerStats
	check  func() error // ctx's cause once it is done
}

// tree writes the entries below src, named prefix + their path relative to src.
func (lw *layerWriter) tree(src, prefix string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := lw.check(); err != nil {
			return err
		}
		if p == src {
			return nil
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		name := prefix + filepath.ToSlash(rel)
		if view, ok := lw.mounts["/"+name]; ok && d.IsDir() {
			if err := lw.entry(view, name, true); err != nil {
				return err
			}
			if err := lw.tree(view, name+"/"); err != nil {
				return err
			}
			return filepath.SkipDir
		}
		return lw.entry(p, name, false)
	})
}

// entry writes the file at p as name; opaque marks a directory as hiding the layers below.
func (lw *layerWriter) entry(p, name string, opaque bool) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		if errors.Is(err, unix.ENAMETOOLONG) {
			return errdefs.Newf(errdefs.CodeNameTooLong, "%.200s…: a path too long for the host (PATH_MAX): move it or delete it before the snapshot", name)
		}
		return fmt.Errorf("lstat %.300s: %w", name, err)
	}
	hdr := &tar.Header{
		Name:    name,
		Mode:    int64(st.Mode & 0o7777),
		Uid:     int(st.Uid),
		Gid:     int(st.Gid),
		ModTime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
		Format:  tar.FormatPAX,
	}
	var (
		content *os.File // a regular file's, open
		extents []sparse.Extent
		holes   bool
		err     error
	)
	if lw.owner != nil {
		hdr.Uid, hdr.Gid = lw.owner(hdr.Uid, hdr.Gid)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
	case unix.S_IFREG:
		key := [2]uint64{st.Dev, st.Ino}
		if first, ok := lw.links[key]; ok {
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
			lw.stats.Entries++
			return lw.tw.WriteHeader(hdr) // a hard link has no attributes of its own
		}
		if st.Nlink > 1 {
			lw.links[key] = name
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
		if st.Size > 0 {
			f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
			if err != nil {
				return fmt.Errorf("open %.300s: %w", name, err)
			}
			defer f.Close()
			content = f
			if extents, holes, err = sparse.Extents(f, st.Size); err != nil {
				return fmt.Errorf("%.300s: %w", name, err)
			}
		}
	case unix.S_IFLNK:
		target, err := os.Readlink(p)
		if err != nil {
			return fmt.Errorf("readlink %s: %w", name, err)
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
	case unix.S_IFCHR:
		if st.Rdev != 0 {
			lw.stats.Skipped++
			return nil
		}
		hdr.Typeflag = tar.TypeChar // an overlay whiteout
	case unix.S_IFIFO:
		hdr.Typeflag = tar.TypeFifo
	default: // block devices, sockets
		lw.stats.Skipped++
		return nil
	}
	if hdr.PAXRecords, err = readXattrs(p); err != nil {
		return fmt.Errorf("xattrs of %s: %w", name, err)
	}
	if holes {
		markSparse(hdr, st.Size, extents)
	}
	if opaque {
		if hdr.PAXRecords == nil {
			hdr.PAXRecords = map[string]string{}
		}
		hdr.PAXRecords[paxOpaque] = "y"
	}
	if err := lw.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	lw.stats.Entries++
	if content != nil {
		if err := sparse.Copy(lw.tw, content, extents, lw.buf, lw.check); err != nil {
			return fmt.Errorf("read %.300s: %w", name, err)
		}
	}
	return nil
}

// readXattrs returns p's kept extended attributes as PAX records, or nil when it has none.
func readXattrs(p string) (map[string]string, error) {
	size, err := unix.Llistxattr(p, nil)
	if err != nil {
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		return nil, err
	}
	if size == 0 {
		return nil, nil
	}
	list := make([]byte, size)
	if size, err = unix.Llistxattr(p, list); err != nil {
		return nil, err
	}
	names := strings.Split(strings.TrimRight(string(list[:size]), "\x00"), "\x00")
	slices.Sort(names)
	var recs map[string]string
	for _, n := range names {
		if !keptXattr(n) {
			continue
		}
		v, err := getXattr(p, n)
		if errors.Is(err, unix.ENODATA) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		if recs == nil {
			recs = map[string]string{}
		}
		recs[paxXattr+n] = string(v)
	}
	return recs, nil
}

func getXattr(p, name string) ([]byte, error) {
	for {
		size, err := unix.Lgetxattr(p, name, nil)
		if err != nil {
			return nil, err
		}
		v := make([]byte, size)
		n, err := unix.Lgetxattr(p, name, v)
		if errors.Is(err, unix.ERANGE) {
			continue // grew in between
		}
		if err != nil {
			return nil, err
		}
		return v[:n], nil
	}
}
