package files

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/fserr"
)

// Mkdir creates directory path. recursive creates parents and accepts an existing directory;
// otherwise an existing path gives FILE_EXISTS and a missing parent FILE_NOT_FOUND.
func Mkdir(path string, recursive bool) error {
	if recursive {
		return fserr.Map(os.MkdirAll(path, 0o755), path)
	}
	return fserr.Map(os.Mkdir(path, 0o755), path)
}

// Delete removes path. A directory needs recursive (else IS_DIRECTORY); a symlink is removed
// itself, never its target. A missing path gives FILE_NOT_FOUND.
func Delete(path string, recursive bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fserr.Map(err, path)
	}
	if fi.IsDir() {
		if !recursive {
			return errdefs.Newf(errdefs.CodeIsDirectory, "%s is a directory; set recursive to delete it", path).
				With("path", path)
		}
		return fserr.Map(os.RemoveAll(path), path)
	}
	return fserr.Map(os.Remove(path), path)
}

// Exists reports whether path exists (a dangling symlink exists). Errors other than "not
// found" and "not a directory" are mapped OS codes.
func Exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
		return false, nil
	default:
		return false, fserr.Map(err, path)
	}
}

// Move moves src to dst like mv: when dst is an existing directory, src goes inside it. Across
// file systems it copies then removes the source. It returns the final destination path.
// Errors: FILE_NOT_FOUND for a missing source, and the mapped OS codes.
func Move(src, dst string) (string, error) {
	if _, err := os.Lstat(src); err != nil {
		return "", fserr.Map(err, src)
	}
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		dst = filepath.Join(dst, filepath.Base(src))
	}
	err := os.Rename(src, dst)
	if errors.Is(err, syscall.EXDEV) {
		if err := copyTree(src, dst); err != nil {
			os.RemoveAll(dst)
			return "", fserr.Map(err, dst)
		}
		return dst, fserr.Map(os.RemoveAll(src), src)
	}
	if err != nil {
		return "", errdefs.Wrap(fserr.CodeOf(err), err, "").With("path", src).With("newPath", dst)
	}
	return dst, nil
}

// copyTree copies src to dst (which must not exist), keeping modes and symlinks.
func copyTree(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	case fi.IsDir():
		if err := os.Mkdir(dst, fi.Mode().Perm()); err != nil {
			return err
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return nil
	case fi.Mode().IsRegular():
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	default:
		return errdefs.Newf(errdefs.CodeFilesystem, "cannot copy %s across file systems: not a regular file, directory or symlink", src)
	}
}
