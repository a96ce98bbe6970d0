package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hutchdev/hutch/errdefs"
)

// tempPrefix starts the name of every file being written by Put. Keys never have a segment
// starting with ".", so temp files are never listed nor addressable.
const tempPrefix = ".tmp-blob-"

// Local is a Store in a local directory: the blob under "a/b.json" is the file <dir>/a/b.json.
// Directories are created 0700 and files 0600. Put writes a temp file in the key's directory,
// fsyncs it, renames it over the key and fsyncs the directory, so a crash leaves either the old
// blob, the new one, or a stale temp file that RemoveStaleTemp deletes.
//
// On local storage a key cannot be both a blob and a directory of other keys ("a" and "a/b"):
// the second Put fails with VALIDATION_FAILED.
type Local struct {
	dir string
	log *slog.Logger
}

var _ Store = (*Local)(nil)

// NewLocal returns a Local store rooted at dir (made absolute; created 0700 if missing). log may
// be nil.
func NewLocal(dir string, log *slog.Logger) (*Local, error) {
	if dir == "" {
		return nil, errdefs.New(errdefs.CodeInvalidArgument, "blob: local store needs a directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.CodeInvalidArgument, err, "blob: local store directory")
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, localErr("open", abs, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, localErr("open", abs, err)
	}
	if !fi.IsDir() {
		return nil, errdefs.Newf(errdefs.CodeNotDirectory, "blob: %s is not a directory", abs)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Local{dir: abs, log: log}, nil
}

// Dir returns the store's absolute root directory.
func (l *Local) Dir() string { return l.dir }

// Describe returns "local:<dir>".
func (l *Local) Describe() string { return "local:" + l.dir }

func (l *Local) path(key string) string { return filepath.Join(l.dir, filepath.FromSlash(key)) }

// Get opens the blob's file; the reader is an *os.File, so it keeps reading the same complete
// blob if the key is replaced or deleted meanwhile.
func (l *Local) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	if err := ValidateKey(key); err != nil {
		return nil, Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return nil, Info{}, fmt.Errorf("blob get %q: %w", key, err)
	}
	f, err := os.OpenFile(l.path(key), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, Info{}, localErr("get", key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, Info{}, localErr("get", key, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, Info{}, notFound(key)
	}
	return f, Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Stat returns the blob's Info.
func (l *Local) Stat(ctx context.Context, key string) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("blob stat %q: %w", key, err)
	}
	fi, err := os.Lstat(l.path(key))
	if err != nil {
		return Info{}, localErr("stat", key, err)
	}
	if !fi.Mode().IsRegular() {
		return Info{}, notFound(key)
	}
	return Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Delete removes the blob's file, then the directories it leaves empty. A missing key (or a
// key naming a directory of other keys) is not an error.
func (l *Local) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("blob delete %q: %w", key, err)
	}
	p := l.path(key)
	if err := syscall.Unlink(p); err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
			return nil
		}
		return localErr("delete", key, &fs.PathError{Op: "unlink", Path: p, Err: err})
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		return localErr("delete", key, err)
	}
	// Prune empty parents; rmdir fails harmlessly on a non-empty one (a concurrent Put's temp
	// file keeps its directory alive, and Put retries if its directory vanishes first).
	for d := filepath.Dir(p); d != l.dir && strings.HasPrefix(d, l.dir+string(filepath.Separator)); d = filepath.Dir(d) {
		if syscall.Rmdir(d) != nil {
			break
		}
	}
	return nil
}

// localErr classifies a filesystem error for op on key.
func localErr(op, key string, err error) error {
	var e *errdefs.Error
	switch {
	case errors.As(err, &e):
		return err
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("blob %s %q: %w", op, key, err)
	case op != "put" && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)):
		return notFound(key)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return errdefs.Wrap(errdefs.CodeNoSpace, err, "blob "+op).With("key", key)
	case errors.Is(err, syscall.EROFS):
		return errdefs.Wrap(errdefs.CodeReadOnly, err, "blob "+op).With("key", key)
	case errors.Is(err, fs.ErrPermission):
		return errdefs.Wrap(errdefs.CodePermission, err, "blob "+op).With("key", key)
	case op == "put" && (errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) || errors.Is(err, fs.ErrExist)):
		return errdefs.Newf(errdefs.CodeInvalidArgument,
			"blob put: key %q conflicts with another key's path on local storage: %w", key, err).With("key", key)
	default:
		return errdefs.Wrap(errdefs.CodeFilesystem, err, "blob "+op).With("key", key)
	}
}

// syncDir fsyncs a directory so renames and unlinks in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}
