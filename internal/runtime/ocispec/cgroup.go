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
// children first. Missing directories are not an error; processes that do not die within
// CgroupWait are (the cgroups are then left). It is what lets a backend's Delete promise that
// no process of the container remains.
func (b Builder) SweepCgroups(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, CgroupWait)
	defer cancel()
	return removeCgroups(ctx, b.CgroupDirs(id))
}

// CgroupWait bounds how long SweepCgroups and SweepStrayCgroups wait for the processes of one
// container's cgroups to die: one in uninterruptible sleep (a hung filesystem) can outlive any
// SIGKILL, and neither a destroy nor hutchd's start (Recover) may wait on it forever.
const CgroupWait = 30 * time.Second

// SweepStrayCgroups removes every child cgroup of the parent (on each hierarchy) whose name
// keep reports false for, thawing and killing what runs in it first; it returns the names
// removed, sorted. A missing parent is not an error; a cgroup whose processes do not die within
// CgroupWait is left, with an error, and the others are still swept. It implements
// runtime.CgroupSweeper for the backends built on Builder.
func (b Builder) SweepStrayCgroups(ctx context.Context, keep func(id string) bool) ([]string, error) {
	var names []string
	var errs []error
	for _, root := range b.Host.CgroupRoots {
		ents, err := os.ReadDir(filepath.Join(root, b.CgroupParent))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("sweep cgroups: %w", err))
			}
			continue
		}
		for _, e := range ents {
			if e.IsDir() && !keep(e.Name()) && !slices.Contains(names, e.Name()) {
				names = append(names, e.Name())
			}
		}
	}
	slices.Sort(names)
	var removed []string
	for _, name := range names {
		wctx, cancel := context.WithTimeout(ctx, CgroupWait)
		err := removeCgroups(wctx, b.CgroupDirs(name))
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep cgroups: %w", err))
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

// removeCgroups removes the cgroup directories dirs (one container's, on every hierarchy)
// and their children: it thaws them all first (a frozen process cannot die, and on cgroup v1
// the freezer is a hierarchy of its own), then kills and removes each, deepest first.
func removeCgroups(ctx context.Context, dirs []string) error {
	for _, dir := range dirs {
		thaw(dir)
	}
	for _, dir := range dirs {
		if err := removeCgroup(ctx, dir); err != nil {
			return err
		}
	}
	return nil
}

// thaw thaws dir and every cgroup below it, parents first: v1's freezer.state, v2's
// cgroup.freeze, whichever the directory has. Missing files and directories are skipped.
func thaw(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if os.WriteFile(filepath.Join(p, "freezer.state"), []byte("THAWED"), 0) != nil {
			_ = os.WriteFile(filepath.Join(p, "cgroup.freeze"), []byte("0"), 0)
		}
		return nil
	})
}

// removeCgroup kills the processes of dir and its children and removes them, deepest first,
// until ctx is done.
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
				return fmt.Errorf("remove cgroup %s (processes %s): %w", d, strings.Join(strings.Fields(string(procs)), " "), ctx.Err())
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
