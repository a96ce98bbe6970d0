// Package files implements the agent's file operations natively with the os package: atomic
// writes, capped and streamed reads with MIME and binary detection, listing, mkdir, delete,
// rename/move and exists. Errors are *errdefs.Error with codes mapped from the OS errno
// (internal/fserr) and context.path naming the path.
package files

import (
	"path/filepath"
	"strings"

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
