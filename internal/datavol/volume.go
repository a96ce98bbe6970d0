// Package datavol keeps hutchd's data on a "data volume": an ext4 file system in an image file,
// attached to a loop device and mounted at a fixed place, like LXD's default loop-backed
// storage pool.
//
// Why: on some hosts the root file system is pathologically slow at creating files (a measured
// `tar x` of 40,000 small files took 29 s there, nearly all of it in openat(O_CREAT), against
// 1.1 s into an ext4 file system in a loop-mounted image on the same disk). Sandbox disks
// (overlay upper and work directories), the snapshot layer cache and the backup tree cache
// create many small files, so hutchd keeps them on a data volume. Operators with a dedicated
// disk can turn the volume off and point hutchd at that disk instead.
//
// Trade-offs:
//   - Reserved space. The image is allocated up front with fallocate, never sparse: a sparse
//     image that cannot allocate when the host disk fills gives the ext4 inside it I/O errors,
//     and ext4 then remounts read-only under every sandbox. Reserving turns that into one clear
//     ResourceExhausted error when the volume is created or grown. To keep the reservation,
//     the file system is made without discard and discard is switched off on the loop device,
//     so fstrim cannot punch holes into the image; every Ensure re-reserves any hole anyway.
//     The price: the whole Size is taken from the host disk even while the volume is empty.
//     Growing a mounted volume resizes ext4 online, which needs CAP_SYS_RESOURCE; without it
//     the file system grows at its next mount, offline. Volumes never shrink.
//   - One loop device per volume, found with LOOP_CTL_GET_FREE (which creates a new device
//     when all are in use) and configured with LO_FLAGS_AUTOCLEAR, so it goes away by itself
//     when the file system is unmounted. It uses buffered I/O: direct I/O measured slower for
//     small files (see directIO in loop.go), at the price of caching volume data twice.
//     Ensure leaves the volume mounted; hutchd does not unmount it on exit, so sandboxes keep
//     running across hutchd restarts, and the next Ensure finds and reuses the mount by its
//     loop device's backing file.
//   - Crash safety. The file system keeps its journal (a volume without one would need a full
//     fsck after every host crash). Each step can be redone: a new image is built as
//     <Image>.tmp and renamed into place only after mkfs, a leftover .tmp is removed and
//     rebuilt, e2fsck -p runs before every fresh mount (replaying the journal and fixing what
//     it may fix without asking; anything worse is a FailedPrecondition error naming the
//     command to run by hand), and a grow that stopped half-way (file grown, file system not)
//     is finished by the next Ensure, which compares the file system's size with the device's.
//   - Quotas. The ext4 `quota` and `project` features would let a later change enforce
//     per-sandbox disk quotas, but ext4 refuses to mount either feature on a kernel built
//     without CONFIG_QFMT_V2 (as the test hosts' kernel is), so volumes are made without them.
//     Inodes are 256 bytes, so `tune2fs -O project,quota` can add them later, offline, on a
//     kernel that has quota support. Per-sandbox limits are Disks instead (disk.go): a sparse
//     ext4 image per sandbox on the volume, on a loop device of its own.
//
// Errors carry errdefs classes: InvalidArgument for a bad Config or size string,
// ResourceExhausted (code NO_SPACE) when the host file system cannot hold the image, and
// FailedPrecondition when the mountpoint carries another mount, the image is in use elsewhere,
// a tool is missing or the file system needs a manual fsck.
package datavol

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
)

// MinSize is the smallest Size a volume may be created with: 64 MiB.
const MinSize = 64 << 20

// Config of a data volume.
type Config struct {
	// Image is the absolute path of the image file. It is created (mode 0600, its directory
	// 0755) when missing.
	Image string
	// Mountpoint is the absolute path where the volume is mounted. It is created (0755) when
	// missing.
	Mountpoint string
	// Size in bytes, rounded up to a whole MiB. It is used when the image is created (and then
	// must be at least MinSize); when an existing image is smaller, the image and its file
	// system are grown to Size. A larger image is never shrunk. 0 keeps an existing image as it
	// is and is an error when the image is missing.
	Size int64
}

// Volume is a mounted data volume, as returned by Ensure.
type Volume struct {
	image      string
	mountpoint string
	device     string
	log        *slog.Logger
}

// Stats are a volume's file system figures, from statfs(2) on its mountpoint.
type Stats struct {
	SizeBytes  uint64 // capacity for data: total blocks less the file system's own overhead
	FreeBytes  uint64 // bytes still free for writing (no blocks are reserved for root)
	Inodes     uint64 // total inodes: the most files, directories and symlinks it can hold
	InodesFree uint64 // inodes still free
}

// Path returns the mountpoint, as given in Config.Mountpoint (cleaned).
func (v *Volume) Path() string { return v.mountpoint }

// Device returns the loop device that carries the volume, e.g. "/dev/loop3".
func (v *Volume) Device() string { return v.device }

// Image returns the image file's path, as given in Config.Image (cleaned).
func (v *Volume) Image() string { return v.image }

// Stats returns the volume's size and free space in bytes and its inode counts.
func (v *Volume) Stats() (Stats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(v.mountpoint, &st); err != nil {
		return Stats{}, fmt.Errorf("volume: statfs %s: %w", v.mountpoint, err)
	}
	bs := uint64(st.Bsize)
	return Stats{
		SizeBytes:  st.Blocks * bs,
		FreeBytes:  st.Bavail * bs,
		Inodes:     st.Files,
		InodesFree: st.Ffree,
	}, nil
}

// Unmount unmounts the volume. When the file system is busy (open files, sandboxes still
// running on it) it is detached lazily: gone from the mount namespace at once, unmounted by
// the kernel when the last user lets go. The loop device detaches itself after that
// (autoclear), asynchronously. Unmount is idempotent: a mountpoint that no longer carries a
// mount is not an error. When the mountpoint now carries a mount that is not this volume's, it
// leaves it alone and returns a FailedPrecondition error.
func (v *Volume) Unmount() error {
	m, ok, err := mountAt(v.mountpoint)
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	if _, mine := loopBackedBy(m, v.image); !mine {
		return fmt.Errorf("volume: %s now carries a %s mount of %s, not the volume in %s: %w",
			v.mountpoint, m.fstype, m.source, v.image, errdefs.ErrFailedPrecondition)
	}
	err = unix.Unmount(v.mountpoint, 0)
	if errors.Is(err, unix.EBUSY) {
		v.log.Warn("data volume busy, detaching lazily", "mountpoint", v.mountpoint)
		err = unix.Unmount(v.mountpoint, unix.MNT_DETACH)
	}
	if err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("volume: unmount %s: %w", v.mountpoint, err)
	}
	v.log.Info("data volume unmounted", "mountpoint", v.mountpoint, "device", v.device)
	return nil
}

// normalize checks cfg and returns it with clean paths and Size rounded up to a whole MiB.
func (cfg Config) normalize() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, errdefs.Newf(errdefs.CodeInvalidArgument, "volume: "+format, args...)
	}
	if !filepath.IsAbs(cfg.Image) {
		return bad("image path %q is not absolute", cfg.Image)
	}
	if !filepath.IsAbs(cfg.Mountpoint) {
		return bad("mountpoint %q is not absolute", cfg.Mountpoint)
	}
	cfg.Image = filepath.Clean(cfg.Image)
	cfg.Mountpoint = filepath.Clean(cfg.Mountpoint)
	if cfg.Mountpoint == "/" {
		return bad("mountpoint may not be /")
	}
	if cfg.Image == cfg.Mountpoint || strings.HasPrefix(cfg.Image, cfg.Mountpoint+"/") {
		return bad("image %s lies under the mountpoint %s", cfg.Image, cfg.Mountpoint)
	}
	if cfg.Size < 0 {
		return bad("size %d is negative", cfg.Size)
	}
	const mib = 1 << 20
	if cfg.Size > (1<<62)-mib {
		return bad("size %d is too large", cfg.Size)
	}
	cfg.Size = (cfg.Size + mib - 1) / mib * mib
	return cfg, nil
}

// requireTool returns the path of an e2fsprogs command, or a FailedPrecondition error.
func requireTool(name string) (string, error) {
	p, err := lookPath(name)
	if err != nil {
		return "", fmt.Errorf("volume: %s not found (install e2fsprogs): %w", name, errdefs.ErrFailedPrecondition)
	}
	return p, nil
}

// lookPath finds name on PATH or in the sbin directories, which root's PATH may lack.
func lookPath(name string) (string, error) {
	for _, dir := range append(filepath.SplitList(os.Getenv("PATH")), "/usr/sbin", "/sbin") {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("volume: %s: %w", name, os.ErrNotExist)
}
