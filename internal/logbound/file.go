package logbound

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"
)

// RotatingFile is an append-only file of bounded size, safe for concurrent use: a Write that
// would take it past maxBytes first renames path to path.1 (path.1 to path.2, …, dropping
// path.<keep>) and starts a new, empty path (mode 0600). A single Write is never split across
// files, so a JSON line (one slog record is one Write) stays whole.
type RotatingFile struct {
	path     string
	maxBytes int64
	keep     int

	mu   sync.Mutex
	f    *os.File // guarded by mu; nil once closed
	size int64    // guarded by mu
}

// OpenRotatingFile opens (creating, mode 0600) path for appending, rotated at maxBytes
// (bytes, > 0) keeping keep (at least 1) rotated files. Errors are the *fs.PathError of
// open or stat.
func OpenRotatingFile(path string, maxBytes int64, keep int) (*RotatingFile, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("rotating file %s: maxBytes %d must be > 0", path, maxBytes)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &RotatingFile{path: path, maxBytes: maxBytes, keep: max(keep, 1), f: f, size: st.Size()}, nil
}

// Write appends p, rotating first when p would take the file past its bound (a p larger than
// the bound goes alone into a new file). When rotation fails nothing is written and the error
// (of rename or open) is returned; the current file is kept. After Close: os.ErrClosed.
func (rf *RotatingFile) Write(p []byte) (int, error) {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if rf.f == nil {
		return 0, os.ErrClosed
	}
	if rf.size > 0 && rf.size+int64(len(p)) > rf.maxBytes {
		if err := rf.rotate(); err != nil {
			return 0, err
		}
	}
	n, err := rf.f.Write(p)
	rf.size += int64(n)
	return n, err
}

// rotate shifts path.i to path.i+1 and path to path.1, then opens a new path. The open file
// is renamed while open (its descriptor follows it) and closed only once the new one is open.
func (rf *RotatingFile) rotate() error {
	for i := rf.keep - 1; i >= 1; i-- {
		err := os.Rename(rf.path+"."+strconv.Itoa(i), rf.path+"."+strconv.Itoa(i+1))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotate %s: %w", rf.path, err)
		}
	}
	if err := os.Rename(rf.path, rf.path+".1"); err != nil {
		return fmt.Errorf("rotate %s: %w", rf.path, err)
	}
	f, err := os.OpenFile(rf.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("rotate %s: %w", rf.path, err)
	}
	rf.f.Close()
	rf.f, rf.size = f, 0
	return nil
}

// Close closes the file; later Writes fail with os.ErrClosed.
func (rf *RotatingFile) Close() error {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if rf.f == nil {
		return os.ErrClosed
	}
	err := rf.f.Close()
	rf.f = nil
	return err
}
