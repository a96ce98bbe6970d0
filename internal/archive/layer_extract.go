package archive

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/sparse"
)

// Extraction tuning: regular files up to inlineMax bytes are read from the stream into a
// buffer and written by a pool of workers (file creation is system-call bound, so several at
// once go faster even on few CPUs); larger ones are written by the reader itself. At most
// inFlightMax bytes of content wait in buffers.
const (
	inlineMax   = 1 << 20
	inFlightMax = 64 << 20
)

// ExtractLayer extracts a layer tar (as WriteLayer writes it) into dir, an existing empty
// directory, as root: owners, modes, modification times, extended attributes (overlay opaque
// markers included), symlinks, hard links, FIFOs and whiteouts (character devices 0/0) are
// recreated exactly, so dir can serve as an overlayfs lower layer. A first entry "./" (a tree
// archive's top directory: hutchd's tree cache extracts backups with ExtractLayer too) gives
// dir its mode, owner and times; otherwise dir's own are left alone.
//
// The archive is untrusted (a blob store may be shared): an entry whose name is absolute,
// has "." or ".." segments, or whose parent is not a directory this extraction made (so no
// entry can land behind a symlink), a name seen twice, a hard link to anything but a regular
// file extracted before, and device nodes other than 0/0 all fail the extraction. On error dir
// holds a partial tree; the caller removes it. Small files are written by several goroutines
// at once; the stream is read once, in order.
func ExtractLayer(r io.Reader, dir string) error {
	x := &layerExtractor{
		dir:   dir,
		dirs:  map[string]bool{".": true},
		files: map[string]bool{},
		seen:  map[string]bool{},
		jobs:  make(chan layerFileJob, 256),
		room:  make(chan struct{}, inFlightMax/(64<<10)),
	}
	workers := max(4, 2*runtime.NumCPU())
	for range workers {
		x.wg.Add(1)
		go x.worker()
	}
	err := x.read(r)
	close(x.jobs)
	x.wg.Wait()
	if err == nil {
		err = x.failure()
	}
	if err != nil {
		return err
	}
	// Hard links once every file is written; then directories' attributes, deepest first,
	// so setting a directory's time is not undone by its children.
	for _, l := range x.links {
		if err := os.Link(filepath.Join(dir, filepath.FromSlash(l[1])), filepath.Join(dir, filepath.FromSlash(l[0]))); err != nil {
			return fmt.Errorf("snapshot layer: %w", err)
		}
	}
	for i := len(x.dirList) - 1; i >= 0; i-- {
		d := x.dirList[i]
		if err := applyLayerMeta(filepath.Join(dir, filepath.FromSlash(d.name)), d.hdr); err != nil {
			return fmt.Errorf("snapshot layer: %s: %w", d.name, err)
		}
	}
	return nil
}

type layerDir struct {
	name string
	hdr  *tar.Header
}

// layerFileJob is a small regular file for the workers: its content and header.
type layerFileJob struct {
	target string
	name   string
	hdr    *tar.Header
	data   []byte
	units  int // room taken (64 KiB units)
}

type layerExtractor struct {
	dir     string
	dirs    map[string]bool // directories made (entry names)
	files   map[string]bool // regular files made
	seen    map[string]bool // every entry name
	dirList []layerDir
	links   [][2]string // hard links to make at the end: name, target name

	jobs chan layerFileJob
	room chan struct{} // a semaphore of 64 KiB units of buffered content
	wg   sync.WaitGroup

	mu  sync.Mutex
	err error // the workers' first error
}

func (x *layerExtractor) fail(err error) {
	x.mu.Lock()
	if x.err == nil {
		x.err = err
	}
	x.mu.Unlock()
}

func (x *layerExtractor) failure() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err
}

func (x *layerExtractor) worker() {
	defer x.wg.Done()
	for j := range x.jobs {
		if x.failure() == nil {
			if err := writeLayerFile(j.target, j.hdr, j.data); err != nil {
				x.fail(fmt.Errorf("snapshot layer: write %s: %w", j.name, err))
			}
		}
		for range j.units {
			<-x.room
		}
	}
}

// read walks the stream, making directories, links and special files itself and handing
// regular files to the workers.
func (x *layerExtractor) read(r io.Reader) error {
	tr := tar.NewReader(r)
	bigBuf := make([]byte, bufSize)
	for {
		if err := x.failure(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("snapshot layer: %w", err)
		}
		if hdr.Name == topEntry && hdr.Typeflag == tar.TypeDir && len(x.seen) == 0 {
			x.dirList = append([]layerDir{{".", hdr}}, x.dirList...)
			x.seen["."] = true
			continue
		}
		name, err := layerEntryName(hdr.Name)
		if err != nil {
			return err
		}
		if !x.dirs[path.Dir(name)] {
			return fmt.Errorf("snapshot layer: entry %q: parent is not a directory of the layer", hdr.Name)
		}
		if x.seen[name] {
			return fmt.Errorf("snapshot layer: entry %q appears twice", hdr.Name)
		}
		x.seen[name] = true
		target := filepath.Join(x.dir, filepath.FromSlash(name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(target, 0o700); err != nil {
				return fmt.Errorf("snapshot layer: %w", err)
			}
			x.dirs[name] = true
			x.dirList = append(x.dirList, layerDir{name, hdr})
			continue // attributes once the directory's content is in place
		case tar.TypeReg:
			x.files[name] = true
			size, ext, isSparse, err := sparse.Parse(hdr.PAXRecords, hdr.Size)
			if err != nil {
				return fmt.Errorf("snapshot layer: %s: %w", name, err)
			}
			if isSparse {
				if err := writeLayerSparse(target, hdr, tr, size, ext, bigBuf); err != nil {
					return fmt.Errorf("snapshot layer: write %s: %w", name, err)
				}
				continue
			}
			if hdr.Size > inlineMax {
				if err := writeLayerStream(target, hdr, tr, bigBuf); err != nil {
					return fmt.Errorf("snapshot layer: write %s: %w", name, err)
				}
				continue
			}
			units := int((hdr.Size + 64<<10 - 1) / (64 << 10))
			for range units {
				x.room <- struct{}{}
			}
			data := make([]byte, hdr.Size)
			if _, err := io.ReadFull(tr, data); err != nil {
				for range units {
					<-x.room
				}
				return fmt.Errorf("snapshot layer: read %s: %w", name, err)
			}
			x.jobs <- layerFileJob{target: target, name: name, hdr: hdr, data: data, units: units}
			continue
		case tar.TypeLink:
			ln, err := layerEntryName(hdr.Linkname)
			if err != nil || !x.files[ln] {
				return fmt.Errorf("snapshot layer: hard link %q → %q: not a file extracted before", hdr.Name, hdr.Linkname)
			}
			x.links = append(x.links, [2]string{name, ln})
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
		if err := applyLayerMeta(target, hdr); err != nil {
			return fmt.Errorf("snapshot layer: %s: %w", name, err)
		}
	}
}

// writeLayerFile creates the regular file target with data and hdr's attributes, all through the
// open descriptor.
func writeLayerFile(target string, hdr *tar.Header, data []byte) error {
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, layerCreateMode(hdr))
	if err != nil {
		return err
	}
	if len(data) > 0 {
		if _, err := f.Write(data); err != nil {
			f.Close()
			return err
		}
	}
	if err := layerFileMeta(f, hdr); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeLayerStream creates the regular file target with hdr.Size bytes from r. Whole buffers
// of zeros become holes (copyHoles, with blocks of len(buf)).
func writeLayerStream(target string, hdr *tar.Header, r io.Reader, buf []byte) error {
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, layerCreateMode(hdr))
	if err != nil {
		return err
	}
	if _, err := copyHoles(f, r, hdr.Size, buf, len(buf), nil); err != nil {
		f.Close()
		return err
	}
	if err := layerFileMeta(f, hdr); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeLayerSparse creates the regular file target of apparent size size from a sparse entry's
// data extents ext in r (internal/sparse): only they are written, the rest stays holes.
func writeLayerSparse(target string, hdr *tar.Header, r io.Reader, size int64, ext []sparse.Extent, buf []byte) error {
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, layerCreateMode(hdr))
	if err != nil {
		return err
	}
	if err := sparse.Restore(f, r, size, ext, buf, nil); err != nil {
		f.Close()
		return err
	}
	if err := layerFileMeta(f, hdr); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// layerCreateMode is the permission a file is created with: hdr's when the process's umask leaves
// it whole (layerFileMeta then needs no chmod), else owner-only until layerFileMeta sets it.
func layerCreateMode(hdr *tar.Header) os.FileMode {
	if m := uint32(hdr.Mode & 0o777); m&processUmask == 0 {
		return os.FileMode(m)
	}
	return 0o600
}

// processUmask is the process's umask, read once (from /proc/self/status: umask(2) cannot read
// it without changing it for every thread meanwhile); all bits set if it cannot be read.
var processUmask = func() uint32 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0o777
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Umask:"); ok {
			var m uint32
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%o", &m); err == nil {
				return m
			}
		}
	}
	return 0o777
}()

// layerFileMeta sets owner, mode (after the owner: chown clears setuid bits), extended attributes
// and modification time of the open regular file f from hdr. A file created by root with its
// final mode (layerCreateMode) needs neither chown nor chmod: they are skipped.
func layerFileMeta(f *os.File, hdr *tar.Header) error {
	fd := int(f.Fd())
	chowned := hdr.Uid != 0 || hdr.Gid != 0 || os.Geteuid() != 0
	if chowned {
		if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
			return fmt.Errorf("chown: %w", err)
		}
	}
	if chowned || hdr.Mode&0o7000 != 0 || layerCreateMode(hdr) != os.FileMode(hdr.Mode&0o777) {
		if err := unix.Fchmod(fd, uint32(hdr.Mode&0o7777)); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
	}
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, paxXattr)
		if !ok || !keptXattr(name) {
			continue
		}
		if err := unix.Fsetxattr(fd, name, []byte(v), 0); err != nil {
			return fmt.Errorf("setxattr %s: %w", name, err)
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
	if err := unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH); err != nil {
		return fmt.Errorf("utimes: %w", err)
	}
	return nil
}

// layerEntryName checks and normalises an entry name: checkName's rules, and the name must be
// clean, without "." segments (a trailing "/" is allowed).
func layerEntryName(raw string) (string, error) {
	name := strings.TrimSuffix(raw, "/")
	if clean, why := checkName(name); why != "" || clean != name || name == "." {
		return "", fmt.Errorf("snapshot layer: entry name %q refused", raw)
	}
	return name, nil
}

// applyLayerMeta sets owner, mode (after the owner: chown clears setuid bits), extended attributes
// and modification time of p from hdr. Symlinks get owner, attributes and time only.
func applyLayerMeta(p string, hdr *tar.Header) error {
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
