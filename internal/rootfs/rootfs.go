// Package rootfs mounts and unmounts the overlay root filesystem of a sandbox.
//
// Each sandbox's root is an overlayfs: the lower directory is a read-only base image
// (internal/image), the upper directory is the sandbox's own disk (every change lands there),
// work is overlayfs's scratch directory (same filesystem as upper) and merged is the mountpoint
// handed to the runtime as the container's root.
//
// Mount state is read from /proc/self/mountinfo, never kept in memory, so a restarted hutchd can
// find (ListMounts) and clean up what a crashed one left behind.
package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Mount mounts an overlayfs at merged with lower as the read-only layer and upper/work as the
// writable layer. lower may also be several directories joined by ':', topmost first (snapshot
// layers above a base image; see JoinLower). Missing upper, work and merged directories are
// created (0755); every lower must exist. All paths must be absolute; upper and work must be on
// the same filesystem.
// merged is made a shared mount (its own peer group), see MountBelow.
// Mounting over an existing mount at merged stacks a second mount, so callers check IsMounted
// first when they may be retrying.
func Mount(lower, upper, work, merged string) error {
	lowers := strings.Split(lower, ":")
	for _, p := range append(lowers[:len(lowers):len(lowers)], upper, work, merged) {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("rootfs: path %q is not absolute", p)
		}
		if strings.ContainsAny(p, ",:") {
			return fmt.Errorf("rootfs: path %q contains ',' or ':', which overlayfs options cannot carry", p)
		}
	}
	for _, l := range lowers {
		if fi, err := os.Stat(l); err != nil {
			return fmt.Errorf("rootfs: lower dir: %w", err)
		} else if !fi.IsDir() {
			return fmt.Errorf("rootfs: lower %q is not a directory", l)
		}
	}
	for _, d := range []string{upper, work, merged} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("rootfs: %w", err)
		}
	}
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		return fmt.Errorf("rootfs: mount overlay at %s: %w", merged, err)
	}
	// Shared, so a mount made below merged on the host later (a backup restored as a mount)
	// propagates into the container, whose runtime makes its copy of the root a slave of it
	// (runc's default rootfs propagation): host → container only, never back.
	if err := unix.Mount("", merged, "", unix.MS_SHARED, ""); err != nil {
		_ = Unmount(merged)
		return fmt.Errorf("rootfs: make %s shared: %w", merged, err)
	}
	return nil
}

// Unmount unmounts merged. It is idempotent: a path that is not a mountpoint (or does not exist)
// is not an error. When the mount is busy it falls back to a lazy detach (MNT_DETACH), so the
// mountpoint is gone from the namespace when Unmount returns even if some process still holds
// files open below it.
func Unmount(merged string) error {
	for {
		err := unix.Unmount(merged, 0)
		switch {
		case err == nil:
			// Overlays may be stacked by a retried Mount; remove them all.
			continue
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil // not a mountpoint any more, or gone
		case errors.Is(err, unix.EBUSY):
			if err := unix.Unmount(merged, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("rootfs: lazy unmount %s: %w", merged, err)
			}
			continue
		case errors.Is(err, unix.EINTR):
			continue
		default:
			return fmt.Errorf("rootfs: unmount %s: %w", merged, err)
		}
	}
}

// JoinLower joins lower directories, topmost first, into Mount's lower argument.
func JoinLower(dirs ...string) string { return strings.Join(dirs, ":") }
