package archive

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/fserr"
)

// AllowedRoots are the directories a backup may be taken of or restored into (or below), after
// symlinks are resolved in the sandbox.
var AllowedRoots = []string{"/workspace", "/home", "/tmp", "/var/tmp", "/app"}

// ResolveDir resolves the symlinks of dir (absolute, clean) as the calling process sees the
// file system: the longest existing ancestor of dir is resolved with filepath.EvalSymlinks and
// the missing rest appended as written. The result must be equal to or below one of roots, or
// one of roots' own resolutions, else INVALID_BACKUP_CONFIG with context {dir, resolved,
// allowedRoots}. A component that is a dangling symlink is INVALID_BACKUP_CONFIG too (what it
// would create cannot be checked); other errors are file codes with context.path.
func ResolveDir(dir string, roots []string) (string, error) {
	resolved, err := resolveExisting(dir)
	if err != nil {
		return "", err
	}
	for _, root := range roots {
		if within(resolved, root) {
			return resolved, nil
		}
		if r, err := filepath.EvalSymlinks(root); err == nil && within(resolved, r) {
			return resolved, nil
		}
	}
	return "", errdefs.Newf(errdefs.CodeInvalidBackupConfig, "dir %q resolves to %q, which is not under an allowed root (%s)",
		dir, resolved, strings.Join(roots, ", ")).With("dir", dir).With("resolved", resolved).With("allowedRoots", roots)
}

// within reports whether p is root or below it.
func within(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

// resolveExisting resolves the longest existing ancestor of dir and appends the rest.
func resolveExisting(dir string) (string, error) {
	var rest []string
	p := dir
	for {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{r}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fserr.Map(err, p)
		}
		if fi, lerr := os.Lstat(p); lerr == nil && fi.Mode().Type() == fs.ModeSymlink {
			// p exists but does not resolve: a dangling symlink. (One in an ancestor is
			// found by a later round.)
			return "", errdefs.Newf(errdefs.CodeInvalidBackupConfig, "dir %q goes through the dangling symlink %s", dir, p).
				With("dir", dir).With("symlink", p)
		}
		if p == "/" {
			return "", fserr.Map(err, dir)
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = filepath.Dir(p)
	}
}

// checkNoMounts refuses a target with a mount point below it (such as a file bind-mounted by
// the runtime, /etc/hostname): the swap would move or remove it. dir itself may be a mount
// point. Errors: INVALID_BACKUP_CONFIG with context {dir, mountPoint}; INTERNAL when the mount
// table cannot be read.
func checkNoMounts(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return errdefs.Wrap(errdefs.CodeInternal, err, "read the mount table")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// "ID PARENT MAJ:MIN ROOT MOUNTPOINT ...", fields octal-escaped.
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp != dir && within(mp, dir) {
			return errdefs.Newf(errdefs.CodeInvalidBackupConfig, "cannot restore into %s: %s below it is a mount point", dir, mp).
				With("dir", dir).With("mountPoint", mp)
		}
	}
	if err := sc.Err(); err != nil {
		return errdefs.Wrap(errdefs.CodeInternal, fmt.Errorf("read the mount table: %w", err), "")
	}
	return nil
}

// unescapeMount decodes the \NNN octal escapes of a mountinfo field.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
