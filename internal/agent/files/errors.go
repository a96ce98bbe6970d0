// Package files implements the agent's file operations natively with the os package: atomic
// writes, capped and streamed reads with MIME and binary detection, listing, mkdir, delete,
// rename/move and exists. Errors are *errdefs.Error with codes mapped from the OS errno and
// context.path naming the path.
package files

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hutchdev/hutch/errdefs"
)

// MaxPathLen is the longest accepted path, in bytes.
const MaxPathLen = 4096

// Resolve validates p (see CheckPath) and makes it absolute against cwd.
func Resolve(cwd, p string) (string, error) {
	if err := CheckPath(p); err != nil {
		return "", err
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	return filepath.Join(cwd, p), nil
}

// CheckPath rejects an empty path, a path with a NUL byte and one longer than MaxPathLen,
// with INVALID_PATH.
func CheckPath(p string) error {
	switch {
	case p == "":
		return errdefs.New(errdefs.CodeInvalidPath, "path is empty").With("path", p)
	case strings.IndexByte(p, 0) >= 0:
		return errdefs.New(errdefs.CodeInvalidPath, "path contains a NUL byte").
			With("path", strings.ReplaceAll(p, "\x00", `\0`))
	case len(p) > MaxPathLen:
		return errdefs.Newf(errdefs.CodeInvalidPath, "path is longer than %d bytes", MaxPathLen).
			With("path", p[:64]+"…")
	}
	return nil
}

// errnoCodes maps OS errors to codes, in match order.
var errnoCodes = []struct {
	errno syscall.Errno
	code  errdefs.Code
}{
	{syscall.ENOENT, errdefs.CodeFileNotFound},
	{syscall.EISDIR, errdefs.CodeIsDirectory},
	{syscall.ENOTDIR, errdefs.CodeNotDirectory},
	{syscall.EEXIST, errdefs.CodeFileExists},
	{syscall.EACCES, errdefs.CodePermission},
	{syscall.EPERM, errdefs.CodePermission},
	{syscall.ENOSPC, errdefs.CodeNoSpace},
	{syscall.EDQUOT, errdefs.CodeNoSpace},
	{syscall.EROFS, errdefs.CodeReadOnly},
	{syscall.ENAMETOOLONG, errdefs.CodeNameTooLong},
	{syscall.EBUSY, errdefs.CodeResourceBusy},
	{syscall.ENOTEMPTY, errdefs.CodeDirectoryNotEmpty},
}

// CodeForError returns the code of an OS error (FILESYSTEM_ERROR when unknown).
func CodeForError(err error) errdefs.Code {
	for _, m := range errnoCodes {
		if errors.Is(err, m.errno) {
			return m.code
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return errdefs.CodeFileNotFound
	}
	return errdefs.CodeFilesystem
}

// MapError wraps an OS error as an *errdefs.Error with the mapped code and context.path =
// path. An err that already is an *errdefs.Error is returned as is; nil gives nil.
func MapError(err error, path string) error {
	if err == nil {
		return nil
	}
	var e *errdefs.Error
	if errors.As(err, &e) {
		return err
	}
	return errdefs.Wrap(CodeForError(err), err, "").With("path", path)
}
