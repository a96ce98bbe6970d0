package ocispec

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SweepCgroups kills whatever is left in container id's cgroups (CgroupDirs) and removes them,
// children first. Missing directories are not an error. It is what lets a backend's Delete
// promise that no process of the container remains.
func (b Builder) SweepCgroups(ctx context.Context, id string) error {
	for _, dir := range b.CgroupDirs(id) {
		if err := removeCgroup(ctx, dir); err != nil {
			return err
		}
	}
	return nil
}

// SweepStrayCgroups removes every child cgroup of the parent (on each hierarchy) whose name
// keep reports false for, killing what runs in it first; it returns the names removed, sorted
// and without repeats. A missing parent is not an error. It implements
// runtime.CgroupSweeper for the backends built on Builder.
func (b Builder) SweepStrayCgroups(ctx context.Context, keep func(id string) bool) ([]string, error) {
	var removed []string
	var errs []error
	for _, root := range b.Host.CgroupRoots {
		parent := filepath.Join(root, b.CgroupParent)
		ents, err := os.ReadDir(parent)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("sweep cgroups: %w", err))
			}
			continue
		}
		for _, e := range ents {
			if !e.IsDir() || keep(e.Name()) {
				continue
			}
			if err := removeCgroup(ctx, filepath.Join(parent, e.Name())); err != nil {
				errs = append(errs, fmt.Errorf("sweep cgroups: %w", err))
				continue
			}
			if !slices.Contains(removed, e.Name()) {
				removed = append(removed, e.Name())
			}
		}
	}
	slices.Sort(removed)
	return removed, errors.Join(errs...)
}

// removeCgroup kills the processes of dir and its children and removes them, deepest first.
func removeCgroup(ctx context.Context, dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		for {
			err := syscall.Rmdir(d)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) {
				return fmt.Errorf("remove cgroup %s: %w", d, err)
			}
			procs, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, f := range strings.Fields(string(procs)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("remove cgroup %s: %w", d, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// MemoryFiles returns the memory-use and memory-limit files of the first of dirs (CgroupDirs)
// whose use reads as a number: cgroup v2's memory.current and memory.max, v1's
// memory.usage_in_bytes and memory.limit_in_bytes. ok is false when none does.
func MemoryFiles(dirs []string) (usage, limit string, ok bool) {
	for _, d := range dirs {
		for _, f := range [][2]string{{"memory.current", "memory.max"}, {"memory.usage_in_bytes", "memory.limit_in_bytes"}} {
			if _, err := ReadInt(filepath.Join(d, f[0])); err == nil {
				return filepath.Join(d, f[0]), filepath.Join(d, f[1]), true
			}
		}
	}
	return "", "", false
}

// ReadInt reads a cgroup file that holds one integer.
func ReadInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
