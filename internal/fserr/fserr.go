// Package fserr maps file system errors to errdefs codes: ENOENT (and fs.ErrNotExist) is
// FILE_NOT_FOUND, ENOSPC and EDQUOT are NO_SPACE, and so on (CodeOf's table). The agent's file
// operations and the tar package that hutchd and the agent share (internal/archive) report
// file errors through it, so a path error has one code whichever side met it.
package fserr

import (
	"errors"
	"io/fs"
	"syscall"

	"github.com/hutchdev/hutch/errdefs"
)

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

// CodeOf returns the code of an OS error, found with errors.Is (so a wrapped errno or
// *fs.PathError counts): FILESYSTEM_ERROR when no entry matches.
func CodeOf(err error) errdefs.Code {
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

// Map wraps an OS error as an *errdefs.Error with CodeOf's code and context.path = path. An
// err that already is an *errdefs.Error is returned as is; nil gives nil.
func Map(err error, path string) error {
	if err == nil {
		return nil
	}
	var e *errdefs.Error
	if errors.As(err, &e) {
		return err
	}
	return errdefs.Wrap(CodeOf(err), err, "").With("path", path)
}
