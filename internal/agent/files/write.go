package files

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/fserr"
)

// Write stores everything from r at path atomically: parents are created, the bytes go to a
// temp file in the same directory, which is then renamed over path, so a failed write never
// leaves a half file. A symlink at path is followed (its target is replaced). An existing
// file keeps its permission bits; a new one gets 0644. It returns the number of bytes written.
//
// Errors: the mapped OS error codes (IS_DIRECTORY when path is a directory, …), or
// VALIDATION_FAILED when reading r fails.
func Write(path string, r io.Reader) (int64, error) {
	target := path
	if t, err := filepath.EvalSymlinks(path); err == nil {
		target = t
	}
	perm := fs.FileMode(0o644)
	if fi, err := os.Stat(target); err == nil {
		if fi.IsDir() {
			return 0, errdefs.Newf(errdefs.CodeIsDirectory, "%s is a directory", path).With("path", path)
		}
		perm = fi.Mode().Perm()
	}
	dir := filepath.Dir(target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fserr.Map(err, path)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".hutch-*")
	if err != nil {
		return 0, fserr.Map(err, path)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	n, err := copyBody(tmp, r)
	if err != nil {
		return n, errOrMapped(err, path)
	}
	if err := tmp.Chmod(perm); err != nil {
		return n, fserr.Map(err, path)
	}
	if err := tmp.Close(); err != nil {
		return n, fserr.Map(err, path)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return n, fserr.Map(err, path)
	}
	ok = true
	return n, nil
}

// readError marks a failure to read the source (not the file system).
type readError struct{ err error }

func (e readError) Error() string { return "read body: " + e.err.Error() }
func (e readError) Unwrap() error { return e.err }

func errOrMapped(err error, path string) error {
	var re readError
	if errors.As(err, &re) {
		return errdefs.Wrap(errdefs.CodeInvalidArgument, re.err, "read body").With("path", path)
	}
	return fserr.Map(err, path)
}

// copyBody copies r to w in 1 MiB steps, telling read errors apart from write errors.
func copyBody(w io.Writer, r io.Reader) (int64, error) {
	buf := make([]byte, 1<<20)
	var total int64
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			m, werr := w.Write(buf[:n])
			total += int64(m)
			if werr != nil {
				return total, werr
			}
		}
		if errors.Is(rerr, io.EOF) {
			return total, nil
		}
		if rerr != nil {
			return total, readError{rerr}
		}
	}
}
