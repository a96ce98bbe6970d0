package archive

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/fserr"
	"github.com/hutchdev/hutch/internal/sparse"
)

// MaxPathLen is the longest entry path (relative to the archived directory, in bytes) Write
// accepts: longer ones could not be extracted anywhere (PATH_MAX is 4096 with the target
// directory's own path in front), so a backup holding one fails with NAME_TOO_LONG at once
// rather than becoming a backup that cannot be restored.
const MaxPathLen = 3584

// bufSize is the size of the write buffer in front of the tar stream and of the copy buffer
// for file contents, in bytes.
const bufSize = 1 << 20

// Options select what Write leaves out.
type Options struct {
	// Excludes are glob patterns (see the package doc).
	Excludes []string
	// Paths are exact paths relative to the directory to leave out, with everything below
	// them; a trailing "/" is ignored.
	Paths []string
	// Owner, when set, maps each entry's numeric owner as stat reports it to the owner the
	// archive records (hutchd reading a sandbox with a user namespace from the host records
	// in-sandbox IDs). Nil records the owner as it is.
	Owner func(uid, gid int) (int, int)
}

// Stats counts what an archive held.
type Stats struct {
	Files     int64 `json:"files"`     // regular files with content
	Dirs      int64 `json:"dirs"`      // directories, the top one included
	Symlinks  int64 `json:"symlinks"`  // symbolic links
	HardLinks int64 `json:"hardLinks"` // hard-link entries (names of an already stored file)
	Skipped   int64 `json:"skipped"`   // sockets, FIFOs and devices left out (Write only)
	Excluded  int64 `json:"excluded"`  // entries left out by Options (Write only)
	Bytes     int64 `json:"bytes"`     // file content bytes
}

// ValidatePatterns checks exclude patterns; a bad one is VALIDATION_FAILED naming it.
func ValidatePatterns(patterns []string) error {
	for _, p := range patterns {
		if p == "" || strings.IndexByte(p, 0) >= 0 {
			return errdefs.Newf(errdefs.CodeInvalidArgument, "exclude pattern %q is empty or has a NUL byte", p).With("pattern", p)
		}
		if _, err := path.Match(strings.Trim(p, "/"), ""); err != nil {
			return errdefs.Wrap(errdefs.CodeInvalidArgument, err, fmt.Sprintf("exclude pattern %q", p)).With("pattern", p)
		}
	}
	return nil
}

// matcher decides what Write leaves out.
type matcher struct {
	base  []pattern // patterns without '/': matched against the base name
	full  []pattern // patterns with '/': matched against the whole relative path
	paths map[string]bool
}

type pattern struct {
	glob    string
	dirOnly bool
}

func newMatcher(opts Options) (*matcher, error) {
	if err := ValidatePatterns(opts.Excludes); err != nil {
		return nil, err
	}
	m := &matcher{paths: make(map[string]bool, len(opts.Paths))}
	for _, p := range opts.Excludes {
		dirOnly := strings.HasSuffix(p, "/")
		p = strings.TrimSuffix(p, "/")
		p = strings.TrimPrefix(p, "./")
		if strings.Contains(p, "/") {
			m.full = append(m.full, pattern{strings.TrimPrefix(p, "/"), dirOnly})
		} else {
			m.base = append(m.base, pattern{p, dirOnly})
		}
	}
	for _, p := range opts.Paths {
		p = path.Clean(strings.TrimSuffix(p, "/"))
		if p != "." && p != "" {
			m.paths[p] = true
		}
	}
	return m, nil
}

// excluded reports whether the entry rel (slash path relative to the top; name is its base
// name) is left out.
func (m *matcher) excluded(rel, name string, isDir bool) bool {
	if m.paths[rel] {
		return true
	}
	for _, p := range m.base {
		if (!p.dirOnly || isDir) && matchGlob(p.glob, name) {
			return true
		}
	}
	for _, p := range m.full {
		if (!p.dirOnly || isDir) && matchGlob(p.glob, rel) {
			return true
		}
	}
	return false
}

func matchGlob(glob, s string) bool {
	ok, _ := path.Match(glob, s) // validated in newMatcher
	return ok
}

// Write streams dir as a tar archive to w and returns what it held. dir must be an existing
// directory (errors: FILE_NOT_FOUND, NOT_DIRECTORY, other file codes with context.path); a bad
// exclude pattern is VALIDATION_FAILED. Entries that vanish while the tree is read are left
// out; a file that shrinks while it is read is padded with zero bytes (its header is already
// written), one that grows is cut at its size. An error after the first byte was written
// leaves w with a truncated archive: the caller must report the failure out of band.
func Write(ctx context.Context, w io.Writer, dir string, opts Options) (Stats, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return Stats{}, fserr.Map(err, dir)
	}
	if !fi.IsDir() {
		return Stats{}, errdefs.Newf(errdefs.CodeNotDirectory, "%s is not a directory", dir).With("path", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Stats{}, fserr.Map(err, dir)
	}
	defer root.Close()
	return WriteRoot(ctx, w, root, opts)
}

// WriteRoot is Write of the directory open as root. Every entry is reached relative to its own
// directory's descriptor (an os.Root per directory), never through a path, and symlinks are
// never followed: a tree that its owner changes meanwhile (a directory swapped for a symlink)
// cannot lead the walk outside root. hutchd uses it to archive a sandbox's directory from the
// host, where the sandbox's symlinks would otherwise resolve against the host's root.
func WriteRoot(ctx context.Context, w io.Writer, root *os.Root, opts Options) (Stats, error) {
	var st Stats
	m, err := newMatcher(opts)
	if err != nil {
		return st, err
	}
	fi, err := root.Stat(".")
	if err != nil {
		return st, fserr.Map(err, root.Name())
	}
	bw := bufio.NewWriterSize(w, bufSize)
	a := &writer{ctx: ctx, tw: tar.NewWriter(bw), m: m, st: &st,
		buf: make([]byte, bufSize), links: map[inode]string{}, owner: opts.Owner}
	if err := a.entry(root, ".", ".", fi); err != nil {
		return st, err
	}
	if err := a.walk(root, ""); err != nil {
		return st, err
	}
	if err := a.tw.Close(); err != nil {
		return st, fmt.Errorf("archive: finish: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return st, fmt.Errorf("archive: write: %w", err)
	}
	return st, nil
}

type inode struct{ dev, ino uint64 }

type writer struct {
	ctx   context.Context // the request's; checked between entries
	tw    *tar.Writer
	m     *matcher
	st    *Stats
	buf   []byte
	links map[inode]string              // first archived name of each multiply linked file
	owner func(uid, gid int) (int, int) // Options.Owner
}

// walk archives the entries below the directory dir (rel: its relative slash path, "" for the
// top), in lexical order.
func (a *writer) walk(dir *os.Root, rel string) error {
	names, err := readNames(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && rel != "" {
			return nil // vanished meanwhile
		}
		return fserr.Map(err, pathOf(dir, ""))
	}
	for _, name := range names {
		if err := a.ctx.Err(); err != nil {
			return fmt.Errorf("archive: %w", err)
		}
		childRel := name
		if rel != "" {
			childRel = rel + "/" + name
		}
		if len(childRel) > MaxPathLen {
			return errdefs.Newf(errdefs.CodeNameTooLong, "%s…: a path longer than %d bytes could not be restored (PATH_MAX); move or exclude it",
				childRel[:200], MaxPathLen).With("path", childRel[:200]+"…")
		}
		fi, err := dir.Lstat(name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return fserr.Map(err, pathOf(dir, name))
		}
		if a.m.excluded(childRel, name, fi.IsDir()) {
			a.st.Excluded++
			continue
		}
		if err := a.entry(dir, name, childRel, fi); err != nil {
			return err
		}
		if fi.IsDir() {
			sub, err := dir.OpenRoot(name)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue // vanished meanwhile
				}
				return fserr.Map(err, pathOf(dir, name))
			}
			err = a.walk(sub, childRel)
			sub.Close()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// pathOf names an entry of dir in errors.
func pathOf(dir *os.Root, name string) string {
	if name == "" {
		return dir.Name()
	}
	return dir.Name() + "/" + name
}

// readNames returns the names in directory dir, sorted.
func readNames(dir *os.Root) ([]string, error) {
	f, err := dir.Open(".")
	if err != nil {
		return nil, err
	}
	return sortedNames(f)
}

// readPathNames returns the names in the directory at p, sorted.
func readPathNames(p string) ([]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	return sortedNames(f)
}

func sortedNames(f *os.File) ([]string, error) {
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// entry writes the header (and content) of dir's entry name (rel: its path in the archive).
func (a *writer) entry(dir *os.Root, name, rel string, fi fs.FileInfo) error {
	sys, _ := fi.Sys().(*syscall.Stat_t)
	// Whole seconds, cut (not rounded as tar.Writer would): like tar(1).
	hdr := &tar.Header{Name: rel, ModTime: fi.ModTime().Truncate(time.Second), Mode: int64(fi.Mode().Perm())}
	if sys != nil {
		hdr.Mode = int64(sys.Mode & 0o7777)
		hdr.Uid, hdr.Gid = int(sys.Uid), int(sys.Gid)
		if a.owner != nil {
			hdr.Uid, hdr.Gid = a.owner(hdr.Uid, hdr.Gid)
		}
	}
	switch fi.Mode().Type() {
	case fs.ModeDir:
		hdr.Typeflag = tar.TypeDir
		if rel == "." {
			hdr.Name = topEntry
		} else {
			hdr.Name = rel + "/"
		}
		a.st.Dirs++
	case fs.ModeSymlink:
		target, err := dir.Readlink(name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fserr.Map(err, pathOf(dir, name))
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		a.st.Symlinks++
	case 0:
		if sys != nil && sys.Nlink > 1 {
			key := inode{uint64(sys.Dev), sys.Ino}
			if first, ok := a.links[key]; ok {
				hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
				a.st.HardLinks++
				return a.writeHeader(hdr)
			}
			a.links[key] = rel
		}
		return a.file(dir, name, hdr, fi.Size())
	default:
		a.st.Skipped++
		return nil
	}
	return a.writeHeader(hdr)
}

func (a *writer) writeHeader(hdr *tar.Header) error {
	if err := a.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("archive: header of %s: %w", hdr.Name, err)
	}
	return nil
}

// file writes a regular file: exactly size bytes (padded or cut, see Write). It is opened
// without following a symlink and without blocking (a FIFO swapped in meanwhile is left out).
func (a *writer) file(dir *os.Root, name string, hdr *tar.Header, size int64) error {
	f, err := dir.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
			return nil // vanished, or replaced by a symlink, meanwhile
		}
		return fserr.Map(err, pathOf(dir, name))
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil // replaced by something else meanwhile
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, size
	// A file with holes travels as its data alone (internal/sparse): a sparse file's apparent
	// size costs nothing to read, compress and store.
	extents, holes, err := sparse.Extents(f, size)
	if err != nil {
		return fserr.Map(&fs.PathError{Op: "seek", Path: pathOf(dir, name), Err: err}, pathOf(dir, name))
	}
	if holes {
		markSparse(hdr, size, extents)
	}
	if err := a.writeHeader(hdr); err != nil {
		return err
	}
	// A file that shrinks meanwhile is padded with zero bytes: its header is already written.
	// The check stops a cancelled backup within a file too.
	if err := sparse.Copy(a.tw, zeroPadded{f}, extents, a.buf, a.check); err != nil {
		if rerr := (*fs.PathError)(nil); errors.As(err, &rerr) {
			return fserr.Map(err, pathOf(dir, name))
		}
		return fmt.Errorf("archive: write %s: %w", hdr.Name, err)
	}
	if err := a.ctx.Err(); err != nil {
		return err
	}
	a.st.Files++
	a.st.Bytes += size
	return nil
}

// check is ctx's error once it is done.
func (a *writer) check() error {
	if err := a.ctx.Err(); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	return nil
}
