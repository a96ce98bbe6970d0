package rootfs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Directory mounts: a directory inside a sandbox's root shows a read-only tree (a restored
// backup) below a writable upper directory of its own. hutchd mounts them on the host below the
// sandbox's root mount (merged), which Mount made shared, so they propagate into the running
// container; the paths inside merged are the sandbox's to change, so every path below merged is
// resolved with openat2(RESOLVE_IN_ROOT): a symlink planted by the sandbox resolves inside its
// own root, never on the host.

// ErrDangling is OpenDir's error for a path through a symlink that leads nowhere.
var ErrDangling = errors.New("dangling symlink")

// OpenDir opens dir (an absolute path as the sandbox sees it) below root (the host path of a
// mounted sandbox root) with O_PATH, resolving symlinks inside root. With create, missing
// components are made as directories (mode 0755, owned by the owner of root's top directory:
// the sandbox's root, which is a host ID of its range under a user namespace). It returns the open directory
// and its resolved path inside root ("/workspace/app"). Errors: fs.ErrNotExist (without create),
// unix.ENOTDIR when a component is not a directory, ErrDangling, unix.ELOOP for symlink loops.
func OpenDir(root, dir string, create bool) (*os.File, string, error) {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return nil, "", fmt.Errorf("rootfs: %q is not an absolute, clean path", dir)
	}
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", fmt.Errorf("rootfs: open %s: %w", root, err)
	}
	defer unix.Close(rfd)
	var rst unix.Stat_t
	if err := unix.Fstat(rfd, &rst); err != nil {
		return nil, "", fmt.Errorf("rootfs: stat %s: %w", root, err)
	}
	rel := strings.TrimPrefix(dir, "/")
	for attempt := 0; ; attempt++ {
		fd, err := openIn(rfd, rel)
		if err == nil {
			f := os.NewFile(uintptr(fd), dir)
			resolved, err := resolvedPath(f, root)
			if err != nil {
				f.Close()
				return nil, "", err
			}
			return f, resolved, nil
		}
		if !errors.Is(err, unix.ENOENT) || !create || attempt > 64 {
			return nil, "", fmt.Errorf("rootfs: open %s in %s: %w", dir, root, err)
		}
		// Make the first missing component, inside its resolved parent, and try again.
		parts := strings.Split(rel, "/")
		made := false
		for i := 1; i <= len(parts); i++ {
			pfd, err := openIn(rfd, strings.Join(parts[:i], "/"))
			if err == nil {
				unix.Close(pfd)
				continue
			}
			if !errors.Is(err, unix.ENOENT) {
				return nil, "", fmt.Errorf("rootfs: open %s in %s: %w", strings.Join(parts[:i], "/"), root, err)
			}
			parent := "."
			if i > 1 {
				parent = strings.Join(parts[:i-1], "/")
			}
			dfd, err := openIn(rfd, parent)
			if err != nil {
				return nil, "", fmt.Errorf("rootfs: open %s in %s: %w", parent, root, err)
			}
			err = unix.Mkdirat(dfd, parts[i-1], 0o755)
			if err == nil && (rst.Uid != 0 || rst.Gid != 0) {
				// Not following a symlink the sandbox may have put there meanwhile.
				err = unix.Fchownat(dfd, parts[i-1], int(rst.Uid), int(rst.Gid), unix.AT_SYMLINK_NOFOLLOW)
			}
			unix.Close(dfd)
			if errors.Is(err, unix.EEXIST) { // there, yet not found: a dangling symlink
				return nil, "", fmt.Errorf("rootfs: %s in %s is a dangling symlink: %w", strings.Join(parts[:i], "/"), root, ErrDangling)
			}
			if err != nil {
				return nil, "", fmt.Errorf("rootfs: mkdir %s in %s: %w", strings.Join(parts[:i], "/"), root, err)
			}
			made = true
			break
		}
		if !made {
			return nil, "", fmt.Errorf("rootfs: open %s in %s: %w", dir, root, unix.ENOENT)
		}
	}
}

// openIn opens rel below the directory rfd as if rfd were the root: an O_PATH directory fd.
func openIn(rfd int, rel string) (int, error) {
	if rel == "" {
		rel = "."
	}
	how := &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	}
	for {
		fd, err := unix.Openat2(rfd, rel, how)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) { // a concurrent rename
			continue
		}
		return fd, err
	}
}

// resolvedPath is f's path inside root, from /proc/self/fd.
func resolvedPath(f *os.File, root string) (string, error) {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return "", fmt.Errorf("rootfs: %w", err)
	}
	if p == root {
		return "/", nil
	}
	rest, ok := strings.CutPrefix(p, root+"/")
	if !ok {
		return "", fmt.Errorf("rootfs: %s resolved outside %s", p, root)
	}
	return "/" + rest, nil
}

// FDPath names an open file for path-based system calls (the kernel follows the magic link to
// the very file, whatever happened to its path since).
func FDPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// IsMountRoot reports whether the open directory f is the root of a mount.
func IsMountRoot(f *os.File) (bool, error) {
	var st unix.Statx_t
	if err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &st); err != nil {
		return false, fmt.Errorf("rootfs: statx: %w", err)
	}
	if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false, errors.New("rootfs: the kernel does not report mount roots")
	}
	return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
}

// MountDir mounts an overlay at the open directory f (from OpenDir) whose read-only layer is
// lower and whose writable layer is upper (work: overlayfs's scratch directory on upper's file
// system). source names the mount in mountinfo. The directory is first copied up in the
// sandbox's own root overlay (an unchanged owner is set again), so it and its parents exist in
// the sandbox's upper directory, where a snapshot finds them. upper's root takes lower's root
// attributes (mode, owner), which the mounted directory shows.
func MountDir(f *os.File, source, lower, upper, work string) error {
	for _, p := range []string{lower, upper, work} {
		if !filepath.IsAbs(p) || strings.ContainsAny(p, ",:") {
			return fmt.Errorf("rootfs: overlay path %q must be absolute without ',' or ':'", p)
		}
	}
	var st unix.Stat_t
	if err := unix.Fstatat(int(f.Fd()), "", &st, unix.AT_EMPTY_PATH); err != nil {
		return fmt.Errorf("rootfs: stat mount point: %w", err)
	}
	if err := unix.Fchownat(int(f.Fd()), "", int(st.Uid), int(st.Gid), unix.AT_EMPTY_PATH); err != nil {
		return fmt.Errorf("rootfs: copy up mount point: %w", err)
	}
	var lst unix.Stat_t
	if err := unix.Stat(lower, &lst); err != nil {
		return fmt.Errorf("rootfs: lower: %w", err)
	}
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("rootfs: %w", err)
		}
	}
	if err := os.Chown(upper, int(lst.Uid), int(lst.Gid)); err != nil {
		return fmt.Errorf("rootfs: %w", err)
	}
	if err := os.Chmod(upper, os.FileMode(lst.Mode&0o777)|modeBits(lst.Mode)); err != nil {
		return fmt.Errorf("rootfs: %w", err)
	}
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount(source, FDPath(f), "overlay", 0, opts); err != nil {
		return fmt.Errorf("rootfs: mount overlay: %w", err)
	}
	return nil
}

func modeBits(m uint32) os.FileMode {
	var out os.FileMode
	if m&unix.S_ISUID != 0 {
		out |= os.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		out |= os.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		out |= os.ModeSticky
	}
	return out
}

// UnmountDir detaches the mount whose root is the open directory f, with every mount below it
// (MNT_DETACH: processes using files there keep them until they let go). A directory that is
// not a mount root is left alone.
func UnmountDir(f *os.File) error {
	root, err := IsMountRoot(f)
	if err != nil || !root {
		return err
	}
	if err := unix.Unmount(FDPath(f), unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("rootfs: unmount: %w", err)
	}
	return nil
}

// MountReadOnly mounts a read-only overlay of lowers (topmost first; an upper directory of a
// directory mount may be one of them: its whiteouts apply) at target, which is created. It
// is how a snapshot reads a directory mount's content without going through the sandbox's paths.
func MountReadOnly(lowers []string, target string) error {
	for _, p := range append(lowers[:len(lowers):len(lowers)], target) {
		if !filepath.IsAbs(p) || strings.ContainsAny(p, ",:") {
			return fmt.Errorf("rootfs: overlay path %q must be absolute without ',' or ':'", p)
		}
	}
	if err := os.MkdirAll(target, 0o700); err != nil {
		return fmt.Errorf("rootfs: %w", err)
	}
	if err := unix.Mount("hutch-view", target, "overlay", unix.MS_RDONLY, "lowerdir="+strings.Join(lowers, ":")); err != nil {
		return fmt.Errorf("rootfs: mount view at %s: %w", target, err)
	}
	return nil
}

// IsShared reports whether the mount at path (a mountpoint) is shared, i.e. mounts made below
// it propagate to its peers and slaves.
func IsShared(path string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("rootfs: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	shared, found := false, false
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 || unescape(fields[4]) != path {
			continue
		}
		found, shared = true, false // the last mount at path is the visible one
		for _, opt := range fields[6:] {
			if opt == "-" {
				break
			}
			if strings.HasPrefix(opt, "shared:") {
				shared = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("rootfs: %w", err)
	}
	if !found {
		return false, fmt.Errorf("rootfs: %s is not a mountpoint", path)
	}
	return shared, nil
}

// MountSource returns the source field (mountinfo's field after the file system type) of the
// mount whose root or content the open file f is on, found by its mount ID (statx), so a path
// the sandbox may have changed is never trusted. It is how hutchd tells its own directory mounts
// ("hutch-backup-<id>") from any other mount.
func MountSource(f *os.File) (string, error) {
	var st unix.Statx_t
	if err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &st); err != nil {
		return "", fmt.Errorf("rootfs: statx: %w", err)
	}
	if st.Mask&unix.STATX_MNT_ID == 0 {
		return "", errors.New("rootfs: the kernel does not report mount IDs")
	}
	mi, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("rootfs: %w", err)
	}
	defer mi.Close()
	id := strconv.FormatUint(st.Mnt_id, 10)
	sc := bufio.NewScanner(mi)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[0] != id {
			continue
		}
		for i, x := range fields {
			if x == "-" && i+2 < len(fields) {
				return unescape(fields[i+2]), nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("rootfs: %w", err)
	}
	return "", fmt.Errorf("rootfs: mount %s not in mountinfo", id)
}

// MountRef is a mount found in mountinfo: its mount ID and its mount point as a path inside a
// sandbox root (where the kernel says it is now, after any renames).
type MountRef struct {
	ID   uint64
	Path string
}

// MountsBySource returns the mounts below root (the host path of a sandbox root) whose source
// is src, deepest first.
func MountsBySource(root, src string) ([]MountRef, error) {
	mi, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("rootfs: %w", err)
	}
	defer mi.Close()
	var out []MountRef
	sc := bufio.NewScanner(mi)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		mp := unescape(fields[4])
		rest, ok := strings.CutPrefix(mp, root+"/")
		if !ok {
			continue
		}
		for i, x := range fields {
			if x == "-" && i+2 < len(fields) {
				if unescape(fields[i+2]) == src {
					id, err := strconv.ParseUint(fields[0], 10, 64)
					if err == nil {
						out = append(out, MountRef{ID: id, Path: "/" + rest})
					}
				}
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("rootfs: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return strings.Count(out[i].Path, "/") > strings.Count(out[j].Path, "/") })
	return out, nil
}

// UnmountRef detaches the mount ref (with everything below it) inside root. It opens ref.Path
// inside root (RESOLVE_IN_ROOT) and detaches only if the directory it reaches is the root of
// mount ref.ID (statx), so a sandbox that renames directories meanwhile can only make the call
// miss, never hit another mount. A mount that moved or went is left alone (it goes when the
// sandbox's root is unmounted); the result says whether it was detached.
func UnmountRef(root string, ref MountRef) (bool, error) {
	f, _, err := OpenDir(root, ref.Path, false)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	var st unix.Statx_t
	if err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &st); err != nil {
		return false, fmt.Errorf("rootfs: statx: %w", err)
	}
	isRoot, err := IsMountRoot(f)
	if err != nil || !isRoot || st.Mnt_id != ref.ID {
		return false, err
	}
	if err := unix.Unmount(FDPath(f), unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return false, fmt.Errorf("rootfs: unmount: %w", err)
	}
	return true, nil
}
