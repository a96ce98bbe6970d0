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
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/fserr"
	"github.com/hutchdev/hutch/internal/sparse"
)

// targetLocks serialises extractions into one target directory.
var targetLocks sync.Map // dir → *sync.Mutex

// Extract reads a tar archive from r and makes dir hold exactly its content, replacing what
// dir held. dir must be absolute and clean; its parents are created (0755) if missing. Callers
// resolve symlinks first (ResolveDir): Extract works on the path as given.
//
// The archive is extracted into a work directory next to dir first (see swap.go: in dir's
// parent, or inside dir when dir is a mount point); only when all of it is there is it swapped
// in: dir is renamed away, the new tree renamed to dir, and the old content removed. Where dir
// cannot be renamed (EXDEV: an overlayfs directory that comes from the image; EBUSY: a mount
// point) the swap moves dir's entries out and the new ones in instead, keeping dir itself. A
// failure at any point (an unsafe entry, a truncated or corrupt archive, a full disk, a
// cancelled ctx, an entry created in dir meanwhile) leaves dir as it was: what was moved is
// moved back, and the work directory is removed. Should moving the old content back fail too,
// the work directory is kept and its path is in the error's context ("kept"); it is never
// removed automatically.
//
// Owners are restored when the process runs as root. Errors: VALIDATION_FAILED for an unsafe
// entry (context {entry}, see the package doc) or a stream that is not a complete tar archive;
// INVALID_BACKUP_CONFIG (context {dir, mountPoint}) when a mount point is below dir;
// NOT_DIRECTORY when dir exists and is not a directory; file codes with context.path (NO_SPACE
// for ENOSPC and EDQUOT, FILE_EXISTS for an entry created in dir during the swap); ctx's error
// wrapped.
func Extract(ctx context.Context, r io.Reader, dir string) (Stats, error) {
	var st Stats
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || dir == "/" {
		return st, errdefs.Newf(errdefs.CodeInvalidPath, "extract target %q must be an absolute, clean path other than /", dir).With("path", dir)
	}
	mu, _ := targetLocks.LoadOrStore(dir, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()

	if err := checkNoMounts(dir); err != nil {
		return st, err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return st, fserr.Map(err, parent)
	}
	workDir := parent
	if fi, err := os.Lstat(dir); err == nil {
		if !fi.IsDir() {
			return st, errdefs.Newf(errdefs.CodeNotDirectory, "%s exists and is not a directory", dir).With("path", dir)
		}
		if mountPoint(dir, parent) {
			workDir = dir // the new content must be on dir's file system
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return st, fserr.Map(err, dir)
	}
	base := filepath.Base(dir)
	removeStale(workDir, base)
	w, err := newWork(workDir, base)
	if err != nil {
		return st, fserr.Map(err, dir)
	}
	x := &extractor{ctx: ctx, tmp: w.newTree(), dir: dir, buf: make([]byte, bufSize), symlinks: map[string]bool{},
		root: dirAttr{rel: ".", mode: 0o755, uid: -1, gid: -1}, chown: os.Geteuid() == 0, st: &st}
	if err := x.run(r); err != nil {
		os.RemoveAll(w.path) // holds only what was extracted
		return st, err
	}
	if err := w.swap(dir, workDir == dir, x.root, x.chown); err != nil {
		return st, err
	}
	return st, nil
}

// mountPoint reports whether dir is on another file system than its parent.
func mountPoint(dir, parent string) bool {
	var a, b unix.Stat_t
	if unix.Lstat(dir, &a) != nil || unix.Lstat(parent, &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}

// dirAttr is what is applied to a directory once everything below it exists.
type dirAttr struct {
	rel      string
	mode     uint32
	uid, gid int
	mtime    time.Time
}

type extractor struct {
	ctx      context.Context
	tmp      string // the new tree
	dir      string // the target (for error paths)
	buf      []byte
	symlinks map[string]bool // relative names of the symlinks extracted so far
	dirs     []dirAttr       // directories with attributes, in archive order
	root     dirAttr         // the "./" entry
	chown    bool
	st       *Stats
}

func (x *extractor) run(r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		if err := x.ctx.Err(); err != nil {
			return fmt.Errorf("extract: %w", err)
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return x.readError(err)
		}
		if err := x.entry(tr, hdr); err != nil {
			return err
		}
	}
	// Modes and times of directories last (deepest first): creating the entries below them
	// changed their mtimes, and a read-only mode would have blocked the creation.
	for i := len(x.dirs) - 1; i >= 0; i-- {
		d := x.dirs[i]
		if err := x.apply(filepath.Join(x.tmp, filepath.FromSlash(d.rel)), d); err != nil {
			return err
		}
	}
	return nil
}

// readError classifies an error of the archive stream.
func (x *extractor) readError(err error) error {
	if cerr := x.ctx.Err(); cerr != nil {
		return fmt.Errorf("extract: %w", cerr)
	}
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errdefs.Wrap(errdefs.CodeInvalidArgument, err, "archive is truncated").With("path", x.dir)
	case errors.Is(err, tar.ErrHeader), errors.Is(err, tar.ErrFieldTooLong), errors.Is(err, tar.ErrInsecurePath):
		return errdefs.Wrap(errdefs.CodeInvalidArgument, err, "not a valid tar archive").With("path", x.dir)
	}
	var ee *errdefs.Error
	if errors.As(err, &ee) {
		return err
	}
	return fmt.Errorf("extract: read archive: %w", err)
}

func unsafeEntry(name, why string) error {
	return errdefs.Newf(errdefs.CodeInvalidArgument, "unsafe archive entry %q: %s", name, why).With("entry", name)
}

// cleanName validates an entry name and returns it clean ("." for the top).
func (x *extractor) cleanName(name string) (string, error) {
	c, why := checkName(name)
	if why != "" {
		return "", unsafeEntry(name, why)
	}
	// No entry may go through a symlink the archive created: that could write outside.
	for i := 0; i < len(c); i++ {
		if c[i] == '/' && x.symlinks[c[:i]] {
			return "", unsafeEntry(name, fmt.Sprintf("goes through the symlink %q", c[:i]))
		}
	}
	return c, nil
}

func (x *extractor) entry(tr *tar.Reader, hdr *tar.Header) error {
	rel, err := x.cleanName(hdr.Name)
	if err != nil {
		return err
	}
	abs := filepath.Join(x.tmp, filepath.FromSlash(rel))
	attr := dirAttr{rel: rel, mode: uint32(hdr.Mode) & 0o7777, uid: hdr.Uid, gid: hdr.Gid, mtime: hdr.ModTime}
	if rel == "." {
		if hdr.Typeflag != tar.TypeDir {
			return unsafeEntry(hdr.Name, "the top entry is not a directory")
		}
		x.root = attr
		x.st.Dirs++
		return nil
	}
	if x.symlinks[rel] && hdr.Typeflag != tar.TypeSymlink {
		delete(x.symlinks, rel) // replaced below
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return x.fsError(err, rel)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := os.Mkdir(abs, 0o700); err != nil {
			if fi, lerr := os.Lstat(abs); lerr != nil || !fi.IsDir() {
				if err := x.replace(abs, func() error { return os.Mkdir(abs, 0o700) }); err != nil {
					return x.fsError(err, rel)
				}
			}
		}
		x.dirs = append(x.dirs, attr)
		x.st.Dirs++
		return nil
	case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // older writers mark regular files with '\x00'; such archives stay readable
		size, ext, isSparse, err := sparse.Parse(hdr.PAXRecords, hdr.Size)
		if err != nil {
			return unsafeEntry(hdr.Name, err.Error())
		}
		if !isSparse {
			size, ext = hdr.Size, nil
		}
		return x.file(tr, abs, rel, size, ext, isSparse, attr)
	case tar.TypeSymlink:
		if hdr.Linkname == "" || strings.IndexByte(hdr.Linkname, 0) >= 0 {
			return unsafeEntry(hdr.Name, "empty symlink target or NUL byte in it")
		}
		if err := x.replace(abs, func() error { return os.Symlink(hdr.Linkname, abs) }); err != nil {
			return x.fsError(err, rel)
		}
		x.symlinks[rel] = true
		x.st.Symlinks++
		return x.apply(abs, attr)
	case tar.TypeLink:
		target, err := x.cleanName(hdr.Linkname)
		if err != nil || target == "." {
			return unsafeEntry(hdr.Name, fmt.Sprintf("hard link to %q, which is not a file of the archive", hdr.Linkname))
		}
		tabs := filepath.Join(x.tmp, filepath.FromSlash(target))
		if fi, err := os.Lstat(tabs); err != nil || !fi.Mode().IsRegular() {
			return unsafeEntry(hdr.Name, fmt.Sprintf("hard link to %q, which is not a regular file extracted before it", hdr.Linkname))
		}
		if err := x.replace(abs, func() error { return os.Link(tabs, abs) }); err != nil {
			return x.fsError(err, rel)
		}
		x.st.HardLinks++
		return nil
	case tar.TypeFifo:
		if err := x.replace(abs, func() error { return unix.Mkfifo(abs, 0o600) }); err != nil {
			return x.fsError(err, rel)
		}
		return x.apply(abs, attr)
	case tar.TypeChar, tar.TypeBlock:
		return unsafeEntry(hdr.Name, "device file")
	default:
		return unsafeEntry(hdr.Name, fmt.Sprintf("unsupported entry type %q", hdr.Typeflag))
	}
}

// replace runs create; if something exists at abs (a duplicate entry), it is removed first.
func (x *extractor) replace(abs string, create func() error) error {
	err := create()
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := os.RemoveAll(abs); err != nil {
		return err
	}
	return create()
}

// file extracts a regular file of apparent size size: from its whole content, or, for a sparse
// entry (internal/sparse), from its data extents ext.
func (x *extractor) file(tr *tar.Reader, abs, rel string, size int64, ext []sparse.Extent, isSparse bool, attr dirAttr) error {
	var f *os.File
	err := x.replace(abs, func() error {
		var err error
		f, err = os.OpenFile(abs, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		return err
	})
	if err != nil {
		return x.fsError(err, rel)
	}
	var n int64
	if isSparse {
		rr := &recordingReader{r: tr}
		err = sparse.Restore(f, rr, size, ext, x.buf, x.ctx.Err)
		if err != nil {
			f.Close()
			switch {
			case x.ctx.Err() != nil:
				return fmt.Errorf("extract: %w", err)
			case rr.err != nil:
				if errors.Is(rr.err, io.EOF) {
					rr.err = io.ErrUnexpectedEOF // the header promised more
				}
				return x.readError(rr.err)
			}
			return x.fsError(err, rel)
		}
		n = sparse.DataBytes(ext)
	} else if n, err = x.copySparse(f, tr, rel, size); err != nil {
		f.Close()
		return err
	}
	fd := int(f.Fd())
	if x.chown && attr.uid >= 0 {
		if err := unix.Fchown(fd, attr.uid, attr.gid); err != nil {
			f.Close()
			return x.fsError(err, rel)
		}
	}
	if err := unix.Fchmod(fd, attr.mode); err != nil {
		f.Close()
		return x.fsError(err, rel)
	}
	if err := f.Close(); err != nil {
		return x.fsError(err, rel)
	}
	if err := x.times(abs, attr.mtime); err != nil {
		return x.fsError(err, rel)
	}
	x.st.Files++
	x.st.Bytes += n
	return nil
}

// recordingReader keeps the first error of its reader, so a failure of the archive stream
// can be told from one of the file being written.
type recordingReader struct {
	r   io.Reader
	err error
}

func (r *recordingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}

// holeBlock is the granularity of hole detection, in bytes: an aligned block of this many zero
// bytes in a file's content is skipped (left a hole) rather than written. A multiple of every
// common file system block size, and a divisor of bufSize.
const holeBlock = 64 << 10

// copySparse writes the size bytes of entry rel's content from r to f (a new, empty file) and
// returns how many it wrote, which is size on success. Aligned holeBlock blocks of zeros become
// holes (copyHoles). Errors: the archive stream's classified by readError, the file's by
// fsError (NO_SPACE for ENOSPC and EDQUOT), ctx's wrapped.
func (x *extractor) copySparse(f *os.File, r io.Reader, rel string, size int64) (int64, error) {
	fromStream, err := copyHoles(f, r, size, x.buf, holeBlock, func() error {
		if err := x.ctx.Err(); err != nil {
			return fmt.Errorf("extract: %w", err)
		}
		return nil
	})
	switch {
	case err == nil:
		return size, nil
	case fromStream:
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the header promised more
		}
		return 0, x.readError(err)
	}
	return 0, x.fsError(err, rel) // ctx's error when it is done
}

// apply sets owner, mode (not for symlinks) and mtime of abs without following a symlink.
func (x *extractor) apply(abs string, a dirAttr) error {
	fi, err := os.Lstat(abs)
	if err != nil {
		return x.fsError(err, a.rel)
	}
	if x.chown && a.uid >= 0 {
		if err := os.Lchown(abs, a.uid, a.gid); err != nil {
			return x.fsError(err, a.rel)
		}
	}
	if fi.Mode().Type() != fs.ModeSymlink {
		if err := unix.Fchmodat(unix.AT_FDCWD, abs, a.mode, 0); err != nil {
			return x.fsError(err, a.rel)
		}
	}
	if err := x.times(abs, a.mtime); err != nil {
		return x.fsError(err, a.rel)
	}
	return nil
}

func (x *extractor) times(abs string, mtime time.Time) error {
	if mtime.IsZero() {
		return nil
	}
	ts := unix.NsecToTimespec(mtime.UnixNano())
	return unix.UtimesNanoAt(unix.AT_FDCWD, abs, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}

// fsError maps a file system error, naming the entry's final path.
func (x *extractor) fsError(err error, rel string) error {
	if cerr := x.ctx.Err(); cerr != nil {
		return fmt.Errorf("extract: %w", cerr)
	}
	return fserr.Map(err, rel2abs(x.dir, rel))
}
