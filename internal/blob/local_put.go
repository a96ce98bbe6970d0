package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// localCopyBuf is the copy buffer size of a local Put, in bytes.
const localCopyBuf = 1 << 20

// Put writes r to a temp file next to the key's file, fsyncs it and renames it over the key.
// On any error the temp file is removed and the key is untouched.
func (l *Local) Put(ctx context.Context, key string, r io.Reader, size int64) (int64, error) {
	if err := ValidateKey(key); err != nil {
		return 0, err
	}
	pr, err := newPutReader(ctx, r, size)
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("blob put %q: %w", key, err)
	}
	dst := l.path(key)
	f, err := l.createTemp(filepath.Dir(dst))
	if err != nil {
		return 0, localErr("put", key, err)
	}
	tmp := f.Name()
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(tmp)
		}
	}()
	buf := make([]byte, localCopyBuf)
	// Hide *os.File's ReadFrom so the large buffer is used.
	if _, err := io.CopyBuffer(struct{ io.Writer }{f}, pr, buf); err != nil {
		if pr.err != nil {
			return 0, pr.err // the source failed, or ctx is done
		}
		return 0, localErr("put", key, err)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("blob put %q: %w", key, err)
	}
	if err := f.Sync(); err != nil {
		return 0, localErr("put", key, err)
	}
	if err := f.Close(); err != nil {
		return 0, localErr("put", key, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return 0, localErr("put", key, err)
	}
	done = true
	if err := syncDir(filepath.Dir(dst)); err != nil {
		// The rename may not survive a crash: report failure and leave nothing half-durable.
		os.Remove(dst)
		return 0, localErr("put", key, err)
	}
	return pr.n, nil
}

// createTemp creates dir (and its parents, each 0700 and fsynced into its parent) and a temp
// file (0600) in it. A concurrent Delete may prune an empty directory between the two steps;
// that is retried.
func (l *Local) createTemp(dir string) (*os.File, error) {
	var err error
	for range 8 {
		if err = l.mkdirAll(dir); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, err
		}
		var f *os.File
		f, err = os.CreateTemp(dir, tempPrefix+"*")
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return nil, err
}

// mkdirAll creates dir below the store root, one level at a time, fsyncing each parent that
// gained an entry.
func (l *Local) mkdirAll(dir string) error {
	rel, err := filepath.Rel(l.dir, dir)
	if err != nil {
		return err
	}
	if rel == "." {
		return nil
	}
	cur := l.dir
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		next := filepath.Join(cur, part)
		err := os.Mkdir(next, 0o700)
		switch {
		case err == nil:
			if err := syncDir(cur); err != nil {
				return err
			}
		case errors.Is(err, fs.ErrExist):
			// A file here fails the next step with ENOTDIR: a key conflict.
		default:
			return err
		}
		cur = next
	}
	return nil
}

// isTemp reports whether a directory entry name is an upload in progress (or a stale one).
func isTemp(name string) bool { return strings.HasPrefix(name, tempPrefix) }
