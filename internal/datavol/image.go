package datavol

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
)

// mkfsArgs are the mkfs.ext4 options of a new volume, before the image path:
//   - -b 4096: 4 KiB blocks whatever the size (mke2fs picks 1 KiB for small file systems);
//   - -i 8192: one inode per 8 KiB of space, twice ext4's default, for trees of many small
//     files (node_modules, git objects); with 256-byte inodes that costs ~3% of the volume;
//   - -I 256: room for nanosecond timestamps and a project ID (see the package doc on quotas);
//   - -m 0: no blocks reserved for root: hutchd and the sandboxes it serves write as root
//     anyway, so a reserve would only hide space;
//   - lazy_itable_init, lazy_journal_init: skip zeroing inode tables and the journal at mkfs;
//     the image is freshly fallocated, so it reads as zeros already;
//   - nodiscard: mke2fs would otherwise discard the whole image, which for a regular file
//     means punching holes, undoing the reservation.
var mkfsArgs = []string{
	"-F", "-q", "-t", "ext4",
	"-b", "4096", "-i", "8192", "-I", "256", "-m", "0",
	"-L", "hutch-data",
	"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard",
}

// createImage builds a new image of size bytes at image: it reserves the space in
// <image>.tmp, makes the file system there and renames it into place, so a crash at any point
// leaves either no image (and a .tmp the next call removes) or a complete one.
func createImage(ctx context.Context, image string, size int64, log *slog.Logger) error {
	if size < MinSize {
		return errdefs.Newf(errdefs.CodeInvalidArgument,
			"volume: image %s is missing and size %d is below the minimum %d to create it", image, size, MinSize)
	}
	mkfs, err := requireTool("mkfs.ext4")
	if err != nil {
		return err
	}
	tmp := image + ".tmp"
	if err := os.Remove(tmp); err == nil {
		log.Warn("removed an unfinished data volume image", "path", tmp)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("volume: remove unfinished image: %w", err)
	}
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("volume: create image: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	err = reserve(f, 0, size)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("volume: close image: %w", cerr)
	}
	if err != nil {
		return err
	}
	log.Info("making data volume file system", "image", image, "bytes", size)
	cmd := exec.CommandContext(ctx, mkfs, append(mkfsArgs[:len(mkfsArgs):len(mkfsArgs)], tmp)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("volume: mkfs.ext4 %s: %w: %s", tmp, err, bytes.TrimSpace(out))
	}
	if err := syncPath(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, image); err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	ok = true
	return syncPath(filepath.Dir(image))
}

// reserve allocates bytes [0, size) of f, extending it when shorter, so the file has no holes
// that could fail to allocate later. On ENOSPC the file is truncated back to oldSize (its size
// before) and a ResourceExhausted error (code NO_SPACE) is returned.
func reserve(f *os.File, oldSize, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if err == nil {
		return nil
	}
	if terr := f.Truncate(oldSize); terr != nil {
		err = errors.Join(err, terr)
	}
	switch {
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EFBIG), errors.Is(err, unix.EDQUOT):
		var st unix.Statfs_t
		free := "unknown"
		if unix.Fstatfs(int(f.Fd()), &st) == nil {
			free = fmt.Sprintf("%d", st.Bavail*uint64(st.Bsize))
		}
		return errdefs.Wrap(errdefs.CodeNoSpace, err, fmt.Sprintf(
			"volume: the file system of %s cannot hold a %d-byte data volume image (%s bytes free there); choose a smaller size or another place",
			f.Name(), size, free)).With("bytes", size)
	case errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("volume: the file system of %s cannot reserve space (no fallocate): %w",
			f.Name(), errdefs.ErrFailedPrecondition)
	}
	return fmt.Errorf("volume: reserve %d bytes in %s: %w", size, f.Name(), err)
}

// reserveImage makes the existing image at least size bytes long and fully allocated (filling
// any hole punched into it since). It returns the image's size afterwards.
func reserveImage(image string, size int64, log *slog.Logger) (int64, error) {
	f, err := os.OpenFile(image, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("volume: open image: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("volume: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return 0, errdefs.Newf(errdefs.CodeInvalidArgument, "volume: image %s is not a regular file", image)
	}
	old := fi.Size()
	target := max(old, size)
	if err := reserve(f, old, target); err != nil {
		return 0, err
	}
	if target > old {
		log.Info("grew data volume image", "image", image, "from", old, "to", target)
		if err := f.Sync(); err != nil {
			return 0, fmt.Errorf("volume: sync image: %w", err)
		}
	}
	return target, nil
}

// fsck runs e2fsck -p (and any extra flags, such as -f) on the unattached image: it replays
// the journal after a crash and fixes what it may fix without asking. Problems that need a
// person are a FailedPrecondition error naming the command to run.
func fsck(ctx context.Context, image string, log *slog.Logger, flags ...string) error {
	e2fsck, err := requireTool("e2fsck")
	if err != nil {
		return err
	}
	args := append(append([]string{"-p"}, flags...), image)
	out, err := exec.CommandContext(ctx, e2fsck, args...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() >= 0 && exit.ExitCode() < 4:
		// 1: errors corrected; 2: corrected, reboot advised (for a root file system only).
		log.Warn("e2fsck corrected the data volume's file system", "image", image,
			"exit", exit.ExitCode(), "output", string(bytes.TrimSpace(out)))
		return nil
	case errors.As(err, &exit) && exit.ExitCode()&(4|8) != 0:
		// 4: errors left uncorrected; 8: e2fsck could not check (e.g. no valid superblock).
		return fmt.Errorf("volume: the file system in %s has errors e2fsck -p will not fix; run `e2fsck -f %s` by hand: %s: %w",
			image, image, bytes.TrimSpace(out), errdefs.ErrFailedPrecondition)
	}
	return fmt.Errorf("volume: e2fsck -p %s: %w: %s", image, err, bytes.TrimSpace(out))
}

// fsBytes returns the size of the ext4 file system on dev (a device or image), read from its
// superblock: block count times block size.
func fsBytes(dev string) (int64, error) {
	f, err := os.Open(dev)
	if err != nil {
		return 0, fmt.Errorf("volume: %w", err)
	}
	defer f.Close()
	sb := make([]byte, 1024)
	if _, err := f.ReadAt(sb, 1024); err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("volume: read superblock of %s: %w", dev, err)
	}
	le := binary.LittleEndian
	if le.Uint16(sb[0x38:]) != 0xEF53 {
		return 0, fmt.Errorf("volume: %s holds no ext4 file system: %w", dev, errdefs.ErrFailedPrecondition)
	}
	blocks := uint64(le.Uint32(sb[0x4:]))
	if le.Uint32(sb[0x60:])&0x80 != 0 { // INCOMPAT_64BIT
		blocks |= uint64(le.Uint32(sb[0x150:])) << 32
	}
	return int64(blocks) << (10 + le.Uint32(sb[0x18:])), nil
}

// resizeFS grows the file system on dev, a mounted device (online) or an unattached image
// (offline), to fill it.
func resizeFS(ctx context.Context, dev string) error {
	resize2fs, err := requireTool("resize2fs")
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, resize2fs, dev).CombinedOutput()
	if err != nil {
		return fmt.Errorf("volume: resize2fs %s: %w: %s", dev, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// syncPath fsyncs a file or directory.
func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("volume: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("volume: sync %s: %w", p, err)
	}
	return nil
}
