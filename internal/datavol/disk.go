package datavol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
)

// Disk is a sandbox's disk with a size limit: a sparse ext4 image of a fixed size, attached to
// its own loop device (autoclear) and mounted at a directory that holds the sandbox's overlay
// upper and work directories. Writes past the size fail with ENOSPC inside that file system;
// the file system the image lives on (the data volume) gives up at most the image's size.
//
// Unlike the data volume, the image is sparse: space is taken as the sandbox writes, up to the
// size, so many sandboxes may be given more than the data volume holds (overcommit). When the
// data volume itself is full, a write into an image that needs a new block fails in the loop
// device, and the disk's ext4 aborts its journal and turns read-only: the operator sizes the
// data volume for the sandboxes' real use. Space freed inside an image is reused by that
// sandbox but stays taken on the data volume until the image is removed (the data volume's
// loop device has discard off, so holes cannot be punched; see the package doc).
//
// The file system keeps a journal (the kernel replays it at the next mount after a crash). Its
// inode tables are not zeroed, neither by mkfs nor by the kernel's lazy init (noinit_itable):
// the image is sparse, so they read as zeros anyway, and zeroing them would take space.
//
// Mount and Unmount are idempotent, and Mount reuses a loop device that is still attached to
// the image (a lazily detached mount that another mount namespace or an overlay still holds):
// mounting that device again yields the same file system, where attaching the image to a second
// device would mount the same ext4 twice and corrupt it.
type Disk struct {
	// Image is the absolute path of the image file.
	Image string
	// Mountpoint is the absolute path of the directory the disk is mounted at.
	Mountpoint string
}

// MinDiskSize is the smallest size a Disk may be created with: 16 MiB.
const MinDiskSize = 16 << 20

// diskMkfsArgs: 4 KiB blocks, one inode per 8 KiB (many small files), no blocks reserved for
// root (the sandbox's user is root), no discard at mkfs (the image is new and sparse), and no
// zeroing of inode tables or journal (see Disk).
var diskMkfsArgs = []string{
	"-F", "-q", "-t", "ext4",
	"-b", "4096", "-i", "8192", "-I", "256", "-m", "0",
	"-L", "hutch-disk",
	"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard",
}

// diskMountData and diskMountFlags are the mount options of a disk: see Disk for
// noinit_itable. nosuid and nodev: the files on it are the sandbox's, and no host process is to
// gain privileges from a set-user-ID file or reach a device through a node the sandbox made
// (the sandbox's own mounts decide what runs inside: overlayfs checks its own mount's flags).
const (
	diskMountData  = "noinit_itable"
	diskMountFlags = unix.MS_NOSUID | unix.MS_NODEV
)

// Create makes the image: a sparse file of size bytes (rounded up to a whole MiB) with an ext4
// file system, built as <Image>.tmp and renamed into place, so a crash leaves no image or a
// complete one. An existing image is left as it is. Errors: InvalidArgument (size below
// MinDiskSize, paths not absolute), FailedPrecondition (mkfs.ext4 missing), ResourceExhausted
// (code NO_SPACE: no room for the file system's metadata).
func (d Disk) Create(ctx context.Context, size int64) error {
	if err := d.check(); err != nil {
		return err
	}
	if size < MinDiskSize {
		return errdefs.Newf(errdefs.CodeInvalidArgument, "volume: disk size %d is below the minimum %d", size, MinDiskSize)
	}
	const mib = 1 << 20
	size = (size + mib - 1) / mib * mib
	if _, err := os.Lstat(d.Image); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("volume: disk image: %w", err)
	}
	mkfs, err := requireTool("mkfs.ext4")
	if err != nil {
		return err
	}
	tmp := d.Image + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("volume: remove unfinished disk image: %w", err)
	}
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("volume: create disk image: %w", err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("volume: size disk image: %w", err)
	}
	out, err := exec.CommandContext(ctx, mkfs, append(diskMkfsArgs[:len(diskMkfsArgs):len(diskMkfsArgs)], tmp)...).CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		if bytes.Contains(out, []byte("No space left")) {
			return errdefs.Newf(errdefs.CodeNoSpace, "volume: no space for the disk image %s: %s", d.Image, bytes.TrimSpace(out))
		}
		return fmt.Errorf("volume: mkfs.ext4 %s: %w: %s", tmp, err, bytes.TrimSpace(out))
	}
	if err := os.Rename(tmp, d.Image); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("volume: %w", err)
	}
	return nil
}

// Exists reports whether the image file exists.
func (d Disk) Exists() (bool, error) {
	_, err := os.Lstat(d.Image)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("volume: disk image: %w", err)
}

// Mounted reports whether the image is mounted at Mountpoint. Another mount there is a
// FailedPrecondition error.
func (d Disk) Mounted() (bool, error) {
	mp, err := filepath.EvalSymlinks(d.Mountpoint) // mountinfo holds resolved paths
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("volume: disk mountpoint: %w", err)
	}
	m, ok, err := mountAt(mp)
	if err != nil || !ok {
		return false, err
	}
	if _, mine := loopBackedBy(m, d.Image); !mine {
		return false, fmt.Errorf("volume: %s carries a %s mount of %s, not the disk %s: %w",
			d.Mountpoint, m.fstype, m.source, d.Image, errdefs.ErrFailedPrecondition)
	}
	return true, nil
}

// Mount mounts the image at Mountpoint (created, 0700, when missing) and reports whether it
// mounted it (false: it was mounted already). A loop device still attached to the image is
// mounted again; otherwise the image is attached to a free loop device with autoclear, so the
// device goes away when the last mount of it does. Errors: NotFound-like os errors when the
// image is missing, FailedPrecondition when Mountpoint carries another mount or the file
// system cannot be mounted (damaged: run e2fsck), or the loop device errors.
func (d Disk) Mount(ctx context.Context, log *slog.Logger) (bool, error) {
	if err := d.check(); err != nil {
		return false, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if ok, err := d.Mounted(); err != nil || ok {
		return false, err
	}
	if _, err := os.Stat(d.Image); err != nil {
		return false, fmt.Errorf("volume: disk image: %w", err)
	}
	if err := os.MkdirAll(d.Mountpoint, 0o700); err != nil {
		return false, fmt.Errorf("volume: disk mountpoint: %w", err)
	}
	loops, err := loopsBackedBy(d.Image)
	if err != nil {
		return false, err
	}
	for _, l := range loops {
		dev := "/dev/" + l.name
		err := unix.Mount(dev, d.Mountpoint, "ext4", diskMountFlags, diskMountData)
		if err == nil {
			log.Info("disk mounted on its attached loop device", "image", d.Image, "device", dev)
			return true, nil
		}
		// The device detached meanwhile (autoclear): attach anew below.
		log.Warn("disk: attached loop device cannot be mounted", "image", d.Image, "device", dev, "err", err)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("volume: %w", err)
	}
	dev, hold, err := attachLoop(d.Image, log, false)
	if err != nil {
		return false, err
	}
	// The open descriptor keeps the autoclear device until the mount holds it.
	defer hold.Close()
	if err := unix.Mount(dev, d.Mountpoint, "ext4", diskMountFlags, diskMountData); err != nil {
		return false, mountError(err, dev, d.Image, d.Mountpoint)
	}
	return true, nil
}

// Unmount unmounts the disk from Mountpoint; the loop device detaches itself (autoclear) once
// no mount of it is left. A busy file system (an overlay on it not yet gone) is detached
// lazily: the kernel unmounts it, and frees the device, when the last user lets go; a Mount
// meanwhile reuses that device. Not mounted is no error; another mount at Mountpoint is a
// FailedPrecondition error and is left alone.
func (d Disk) Unmount(log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for {
		ok, err := d.Mounted()
		if err != nil || !ok {
			return err
		}
		err = unix.Unmount(d.Mountpoint, 0)
		if errors.Is(err, unix.EBUSY) {
			log.Warn("disk busy, detaching lazily", "mountpoint", d.Mountpoint)
			err = unix.Unmount(d.Mountpoint, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("volume: unmount disk %s: %w", d.Mountpoint, err)
		}
		// Loop again: a mount may have been stacked on the same place.
	}
}

// Remove unmounts the disk and removes the image and the (empty) mountpoint. A missing image
// is no error.
func (d Disk) Remove(log *slog.Logger) error {
	if err := d.Unmount(log); err != nil {
		return err
	}
	if err := os.Remove(d.Image); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("volume: remove disk image: %w", err)
	}
	if err := os.Remove(d.Mountpoint); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("volume: remove disk mountpoint: %w", err)
	}
	return nil
}

// check validates the paths.
func (d Disk) check() error {
	if !filepath.IsAbs(d.Image) || !filepath.IsAbs(d.Mountpoint) {
		return errdefs.Newf(errdefs.CodeInvalidArgument, "volume: disk paths must be absolute (image %q, mountpoint %q)", d.Image, d.Mountpoint)
	}
	return nil
}
