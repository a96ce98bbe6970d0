package snapshot

import (
	"archive/tar"
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
)

// paxXattr prefixes an extended attribute's name in a PAX record (the GNU tar / star form).
const paxXattr = "SCHILY.xattr."

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
func WriteLayer(w io.Writer, root string) (LayerStats, error) {
	var stats LayerStats
	if _, err := os.Lstat(root); errors.Is(err, fs.ErrNotExist) {
		return stats, tar.NewWriter(w).Close()
	}
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{} // (dev, ino) → first path, for files with nlink > 1
	buf := make([]byte, 1<<20)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return fmt.Errorf("lstat %s: %w", name, err)
		}
		hdr := &tar.Header{
			Name:    name,
			Mode:    int64(st.Mode & 0o7777),
			Uid:     int(st.Uid),
			Gid:     int(st.Gid),
			ModTime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
			Format:  tar.FormatPAX,
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
		case unix.S_IFREG:
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := links[key]; ok {
				hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
				stats.Entries++
				return tw.WriteHeader(hdr) // a hard link has no attributes of its own
			}
			if st.Nlink > 1 {
				links[key] = name
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("readlink %s: %w", name, err)
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		case unix.S_IFCHR:
			if st.Rdev != 0 {
				stats.Skipped++
				return nil
			}
			hdr.Typeflag = tar.TypeChar // an overlay whiteout
		case unix.S_IFIFO:
			hdr.Typeflag = tar.TypeFifo
		default: // block devices, sockets
			stats.Skipped++
			return nil
		}
		if hdr.PAXRecords, err = readXattrs(p); err != nil {
			return fmt.Errorf("xattrs of %s: %w", name, err)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		stats.Entries++
		if hdr.Typeflag == tar.TypeReg && hdr.Size > 0 {
			return copyFile(tw, p, hdr.Size, buf)
		}
		return nil
	})
	if err != nil {
		return stats, fmt.Errorf("snapshot layer: %w", err)
	}
	return stats, tw.Close()
}

// copyFile writes exactly size bytes of the file at p to w.
func copyFile(w io.Writer, p string, size int64, buf []byte) error {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.CopyBuffer(w, io.LimitReader(onlyReader{f}, size), buf)
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	if n != size {
		return fmt.Errorf("read %s: file shrank from %d to %d bytes while being captured", p, size, n)
	}
	return nil
}

// onlyReader hides a reader's other methods, so io.Copy does not take a shortcut (WriterTo)
// that would read past the limit.
type onlyReader struct{ io.Reader }

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
