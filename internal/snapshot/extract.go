package snapshot

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ExtractLayer extracts a layer tar (as WriteLayer writes it) into dir, an existing empty
// directory, as root: owners, modes, modification times, extended attributes (overlay opaque
// markers included), symlinks, hard links, FIFOs and whiteouts (character devices 0/0) are
// recreated exactly, so dir can serve as an overlayfs lower layer. dir's own mode, owner and
// times are left alone.
//
// The archive is untrusted (a blob store may be shared): an entry whose name is absolute,
// has "." or ".." segments, or whose parent is not a directory this extraction made (so no
// entry can land behind a symlink), a name seen twice, a hard link to anything but a regular
// file extracted before, and device nodes other than 0/0 all fail the extraction. On error dir
// holds a partial tree; the caller removes it.
func ExtractLayer(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	dirs := map[string]bool{".": true}
	files := map[string]bool{}
	type dirMeta struct {
		name string
		hdr  *tar.Header
	}
	var dirList []dirMeta
	buf := make([]byte, 1<<20)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("snapshot layer: %w", err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return err
		}
		if !dirs[path.Dir(name)] {
			return fmt.Errorf("snapshot layer: entry %q: parent is not a directory of the layer", hdr.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		if _, err := os.Lstat(target); err == nil {
			return fmt.Errorf("snapshot layer: entry %q appears twice", hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(target, 0o700); err != nil {
				return fmt.Errorf("snapshot layer: %w", err)
			}
			dirs[name] = true
			dirList = append(dirList, dirMeta{name, hdr})
			continue // attributes once the directory's content is in place
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
			if err != nil {
				return fmt.Errorf("snapshot layer: %w", err)
			}
			_, err = io.CopyBuffer(f, onlyReader{tr}, buf)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("snapshot layer: write %s: %w", name, err)
			}
			files[name] = true
		case tar.TypeLink:
			ln, err := entryName(hdr.Linkname)
			if err != nil || !files[ln] {
				return fmt.Errorf("snapshot layer: hard link %q → %q: not a file extracted before", hdr.Name, hdr.Linkname)
			}
			if err := os.Link(filepath.Join(dir, filepath.FromSlash(ln)), target); err != nil {
				return fmt.Errorf("snapshot layer: %w", err)
			}
			continue // shares the first name's inode and attributes
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return fmt.Errorf("snapshot layer: %w", err)
			}
		case tar.TypeChar:
			if hdr.Devmajor != 0 || hdr.Devminor != 0 {
				return fmt.Errorf("snapshot layer: device node %q (%d:%d) refused: only whiteouts (0:0)", hdr.Name, hdr.Devmajor, hdr.Devminor)
			}
			if err := unix.Mknod(target, unix.S_IFCHR|0o600, 0); err != nil {
				return fmt.Errorf("snapshot layer: whiteout %s: %w", name, err)
			}
		case tar.TypeFifo:
			if err := unix.Mkfifo(target, 0o600); err != nil {
				return fmt.Errorf("snapshot layer: %w", err)
			}
		default:
			return fmt.Errorf("snapshot layer: entry %q has unsupported type %q", hdr.Name, hdr.Typeflag)
		}
		if err := applyMeta(target, hdr); err != nil {
			return fmt.Errorf("snapshot layer: %s: %w", name, err)
		}
	}
	// Deepest first, so setting a directory's time is not undone by its children.
	for i := len(dirList) - 1; i >= 0; i-- {
		d := dirList[i]
		if err := applyMeta(filepath.Join(dir, filepath.FromSlash(d.name)), d.hdr); err != nil {
			return fmt.Errorf("snapshot layer: %s: %w", d.name, err)
		}
	}
	return nil
}

// entryName checks and normalises an entry name: relative, clean, no "." or ".." segments.
func entryName(raw string) (string, error) {
	name := strings.TrimSuffix(raw, "/")
	if name == "" || strings.HasPrefix(name, "/") || strings.ContainsRune(name, 0) || path.Clean(name) != name {
		return "", fmt.Errorf("snapshot layer: entry name %q refused", raw)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "." || seg == ".." {
			return "", fmt.Errorf("snapshot layer: entry name %q refused", raw)
		}
	}
	return name, nil
}

// applyMeta sets owner, mode (after the owner: chown clears setuid bits), extended attributes
// and modification time of p from hdr. Symlinks get owner, attributes and time only.
func applyMeta(p string, hdr *tar.Header) error {
	if err := os.Lchown(p, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	if hdr.Typeflag != tar.TypeSymlink {
		if err := unix.Chmod(p, uint32(hdr.Mode&0o7777)); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
	}
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, paxXattr)
		if !ok || !keptXattr(name) {
			continue
		}
		if err := unix.Lsetxattr(p, name, []byte(v), 0); err != nil {
			if hdr.Typeflag == tar.TypeSymlink && errors.Is(err, unix.EPERM) {
				continue // user.* attributes cannot be set on symlinks
			}
			return fmt.Errorf("setxattr %s: %w", name, err)
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("utimes: %w", err)
	}
	return nil
}
