package ocispec

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
