package datavol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
)

// Ensure makes sure the data volume described by cfg is mounted at cfg.Mountpoint and returns
// it. It is idempotent:
//   - When cfg.Mountpoint already carries an ext4 mount from a loop device backed by cfg.Image
//     (a hutchd restart while sandboxes keep running on it), that mount is reused: no second
//     mount, same device. If cfg.Size asks for more, the image is grown and the file system
//     with it, online when the process has CAP_SYS_RESOURCE, else at the next fresh mount.
//   - When cfg.Mountpoint carries any other mount, Ensure refuses with a FailedPrecondition
//     error and never mounts over it. So it does when the image is mounted somewhere else.
//   - Otherwise it creates the image when missing (space reserved with fallocate, ext4 made by
//     mkfs.ext4; a ResourceExhausted error with code NO_SPACE, and nothing left behind, when
//     the host file system cannot hold it), grows it when smaller than cfg.Size, runs
//     e2fsck -p, grows the file system offline when smaller than the image, attaches the
//     image to a free loop device (autoclear) and mounts it.
//
// Missing directories of Image and Mountpoint are created. Concurrent Ensure calls for images
// in the same directory, from any process, are serialised with flock(2) on that directory.
// log may be nil. A crash at any step leaves state that the next Ensure finishes or redoes
// (see the package doc).
func Ensure(ctx context.Context, cfg Config, log *slog.Logger) (*Volume, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(cfg.Image)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("volume: image directory: %w", err)
	}
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := os.MkdirAll(cfg.Mountpoint, 0o755); err != nil {
		return nil, fmt.Errorf("volume: mountpoint: %w", err)
	}
	// mountinfo holds resolved paths.
	mp, err := filepath.EvalSymlinks(cfg.Mountpoint)
	if err != nil {
		return nil, fmt.Errorf("volume: mountpoint: %w", err)
	}
	v := &Volume{image: cfg.Image, mountpoint: mp, log: log}

	m, mounted, err := mountAt(mp)
	if err != nil {
		return nil, err
	}
	if mounted {
		dev, ours := loopBackedBy(m, cfg.Image)
		if !ours {
			return nil, fmt.Errorf("volume: mountpoint %s already carries a %s mount of %s; refusing to mount the data volume %s over it: %w",
				mp, m.fstype, m.source, cfg.Image, errdefs.ErrFailedPrecondition)
		}
		v.device = dev
		log.Info("data volume already mounted", "mountpoint", mp, "device", dev, "image", cfg.Image)
		if _, err := reserveImage(cfg.Image, cfg.Size, log); err != nil {
			return nil, err
		}
		if err := v.fill(ctx); err != nil {
			return nil, err
		}
		return v, nil
	}

	switch fi, err := os.Lstat(cfg.Image); {
	case errors.Is(err, os.ErrNotExist):
		if cfg.Size == 0 {
			return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "volume: image %s is missing and no size was given to create it", cfg.Image)
		}
		if err := createImage(ctx, cfg.Image, cfg.Size, log); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("volume: image: %w", err)
	case !fi.Mode().IsRegular():
		return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "volume: image %s is not a regular file", cfg.Image)
	default:
		if err := checkImageFree(cfg.Image); err != nil {
			return nil, err
		}
		if _, err := reserveImage(cfg.Image, cfg.Size, log); err != nil {
			return nil, err
		}
	}
	if err := fsck(ctx, cfg.Image, log); err != nil {
		return nil, err
	}
	if err := growOffline(ctx, cfg.Image, log); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("volume: %w", err)
	}

	dev, hold, err := attach(cfg.Image, log)
	if err != nil {
		return nil, err
	}
	// Closing hold before the mount exists would detach the device (autoclear); after it,
	// the mount keeps the device until unmounted.
	defer hold.Close()
	if err := unix.Mount(dev, mp, "ext4", 0, ""); err != nil {
		return nil, mountError(err, dev, cfg.Image, mp)
	}
	v.device = dev
	log.Info("data volume mounted", "mountpoint", mp, "device", dev, "image", cfg.Image, "direct_io", directIO)
	if err := v.fill(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

// fill makes the loop device and then the mounted file system take up the whole image,
// finishing a grow (or one a crash interrupted). The file system is resized online, which
// ext4 allows only with CAP_SYS_RESOURCE; without it the grow is left, with a warning, to the
// next fresh mount, which resizes offline (see growOffline).
func (v *Volume) fill(ctx context.Context) error {
	fi, err := os.Stat(v.image)
	if err != nil {
		return fmt.Errorf("volume: image: %w", err)
	}
	devBytes, err := deviceBytes(v.device)
	if err != nil {
		return err
	}
	if devBytes < fi.Size()&^511 {
		if err := setCapacity(v.device); err != nil {
			return err
		}
		if devBytes, err = deviceBytes(v.device); err != nil {
			return err
		}
	}
	fsb, err := fsBytes(v.device)
	if err != nil {
		return err
	}
	if fsb+4096 > devBytes {
		return nil
	}
	if !hasCapSysResource() {
		v.log.Warn("cannot grow the mounted data volume: online resize needs CAP_SYS_RESOURCE; it grows at its next mount",
			"device", v.device, "bytes", fsb, "want", devBytes)
		return nil
	}
	v.log.Info("growing data volume file system online", "device", v.device, "from", fsb, "to", devBytes)
	return resizeFS(ctx, v.device)
}

// growOffline grows the file system in the unattached image to fill the image, when smaller:
// e2fsck -f (resize2fs insists on a freshly checked file system) and resize2fs on the file.
func growOffline(ctx context.Context, image string, log *slog.Logger) error {
	fi, err := os.Stat(image)
	if err != nil {
		return fmt.Errorf("volume: image: %w", err)
	}
	fsb, err := fsBytes(image)
	if err != nil {
		return err
	}
	if fsb+4096 > fi.Size() {
		return nil
	}
	log.Info("growing data volume file system", "image", image, "from", fsb, "to", fi.Size())
	if err := fsck(ctx, image, log, "-f"); err != nil {
		return err
	}
	return resizeFS(ctx, image)
}

// hasCapSysResource reports whether this process has CAP_SYS_RESOURCE in its effective set.
func hasCapSysResource() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && caps&(1<<unix.CAP_SYS_RESOURCE) != 0
		}
	}
	return false
}

// mountError classifies a failed mount(2) of the volume.
func mountError(err error, dev, image, mp string) error {
	switch {
	case errors.Is(err, unix.EUCLEAN), errors.Is(err, unix.EBADMSG), errors.Is(err, unix.EINVAL):
		return fmt.Errorf("volume: mount %s (image %s) at %s: %v; the file system may be damaged: see dmesg and run `e2fsck -f %s`: %w",
			dev, image, mp, err, image, errdefs.ErrFailedPrecondition)
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("volume: mount %s (image %s) at %s: %v: %w", dev, image, mp, err, errdefs.ErrFailedPrecondition)
	}
	return fmt.Errorf("volume: mount %s (image %s) at %s: %w", dev, image, mp, err)
}

// lockDir takes an exclusive flock(2) on directory dir, waiting until ctx is done. It returns
// the function that releases it.
func lockDir(ctx context.Context, dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("volume: lock %s: %w", dir, err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("volume: lock %s: %w", dir, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("volume: waiting for another Ensure on %s: %w", dir, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
