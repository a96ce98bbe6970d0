// Package treecache keeps extracted directory trees on the host, one per key: <dir>/<key>/.
// The snapshot layer cache (internal/snapshot) and the backup tree cache (internal/backup) are
// both made of it; they differ only in where a missing tree comes from.
//
// An entry is made in a temp directory inside dir (".tmp-*", on the same file system) and
// renamed into place whole (Adopt), so a present entry is always complete; temp directories a
// crash left are removed by Open. Entries are shared read-only (they are overlayfs lower
// layers, which overlayfs never writes). An entry's modification time is its last use (Touch,
// Adopt); GC removes entries not in use and unused for a while, renaming each away first so it
// disappears at once. dir is 0700: trees keep sandbox owners and setuid bits, which no host
// user may reach.
package treecache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Cache is a directory of trees by key. It is safe for concurrent use.
type Cache struct {
	dir   string
	valid func(key string) bool // which names in dir are entries (GC leaves the rest alone)

	mu    sync.Mutex             // guards locks; GC holds it while it removes
	locks map[string]*sync.Mutex // key → lock of its making
}

// Open opens (creating, mode 0700) the cache in dir and removes temp directories a crash left.
// valid tells entry names from anything else in dir.
func Open(dir string, valid func(key string) bool) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tree cache: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tree cache: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tree cache: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return &Cache{dir: dir, valid: valid, locks: map[string]*sync.Mutex{}}, nil
}

// Dir returns the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// Path returns the directory of key's entry (present or not).
func (c *Cache) Path(key string) string { return filepath.Join(c.dir, key) }

// Has reports whether key's entry is present.
func (c *Cache) Has(key string) bool {
	_, err := os.Stat(c.Path(key))
	return err == nil
}

// Touch marks key's entry used now and reports whether it is present.
func (c *Cache) Touch(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	return os.Chtimes(c.Path(key), now, now) == nil
}

// Lock takes the lock of making key's entry and returns its unlock function: callers that may
// make an entry take it, check Has again, and make the entry only if it is still missing.
func (c *Cache) Lock(key string) func() {
	c.mu.Lock()
	l := c.locks[key]
	if l == nil {
		l = &sync.Mutex{}
		c.locks[key] = l
	}
	c.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// TempDir makes an empty temp directory (mode 0755) inside the cache, to fill and Adopt.
func (c *Cache) TempDir() (string, error) {
	d, err := os.MkdirTemp(c.dir, ".tmp-")
	if err != nil {
		return "", fmt.Errorf("tree cache: %w", err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		os.RemoveAll(d)
		return "", fmt.Errorf("tree cache: %w", err)
	}
	return d, nil
}

// Adopt moves the filled directory tmp (from TempDir, or a directory below it) into place as
// key's entry, or removes it when the entry is there already, and marks the entry used now.
func (c *Cache) Adopt(key, tmp string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	dst := c.Path(key)
	if _, err := os.Stat(dst); err == nil {
		return os.RemoveAll(tmp)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("tree cache: %w", err)
	}
	now := time.Now()
	_ = os.Chtimes(dst, now, now)
	return nil
}

// Remove removes key's entry now (renamed away first, so it disappears at once). A missing
// entry is not an error. Callers make sure nothing uses it.
func (c *Cache) Remove(key string) error {
	unlock := c.Lock(key)
	defer unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	trash := filepath.Join(c.dir, ".gc-"+key)
	if err := os.Rename(c.Path(key), trash); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("tree cache: %w", err)
	}
	if err := os.RemoveAll(trash); err != nil {
		return fmt.Errorf("tree cache: %w", err)
	}
	return nil
}

// GC removes the entries whose key is not in used and that were last used more than minAge
// ago, and returns their keys. It goes on after a failed removal and returns the errors joined.
func (c *Cache) GC(ctx context.Context, used map[string]bool, minAge time.Duration) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, fmt.Errorf("tree cache gc: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		key := e.Name()
		if !c.valid(key) || used[key] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		fi, err := e.Info()
		if err != nil || time.Since(fi.ModTime()) < minAge {
			continue
		}
		// Rename first: the entry disappears at once, the removal may take a while.
		trash := filepath.Join(c.dir, ".gc-"+key)
		if err := os.Rename(filepath.Join(c.dir, key), trash); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.RemoveAll(trash); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		removed = append(removed, key)
	}
	return removed, errors.Join(errs...)
}
