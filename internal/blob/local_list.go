package blob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// List walks the directories that can hold keys starting with prefix. Temp files of uploads in
// progress are skipped.
func (l *Local) List(ctx context.Context, prefix string) ([]Info, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	start := l.dir
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = l.path(prefix[:i])
	}
	var out []Info
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil // the prefix's directory is missing, or an entry vanished
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == l.dir {
			return nil
		}
		rel, err := filepath.Rel(l.dir, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if p == start || strings.HasPrefix(key+"/", prefix) || strings.HasPrefix(prefix, key+"/") {
				return nil
			}
			return fs.SkipDir
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // deleted meanwhile
			}
			return err
		}
		out = append(out, Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("blob list %q: %w", prefix, ctx.Err())
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, localErr("list", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// RemoveStaleTemp deletes temp files of uploads whose last write is older than olderThan (a
// crashed or killed Put) and returns how many it removed. A live Put writes continuously, so an
// age well above the slowest expected write stall (say 1 h) never removes one. Open runs it.
func (l *Local) RemoveStaleTemp(ctx context.Context, olderThan time.Duration) (int, error) {
	cutoff := time.Now().Add(-olderThan)
	removed := 0
	err := filepath.WalkDir(l.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !isTemp(d.Name()) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if fi.ModTime().After(cutoff) {
			return nil
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		removed++
		l.log.Info("blob: removed stale temp file", "path", p, "size", fi.Size(), "mod_time", fi.ModTime())
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return removed, fmt.Errorf("blob: removing stale temp files: %w", ctx.Err())
		}
		return removed, localErr("cleanup", l.dir, err)
	}
	return removed, nil
}
