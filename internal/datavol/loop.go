package datavol

import (
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

// loopMajor is the block major number of loop devices (Documentation/admin-guide/devices.txt).
const loopMajor = 7

// directIO selects LO_FLAGS_DIRECT_IO for new loop devices, which makes the loop driver read
// and write the image with O_DIRECT: volume data would be cached once (in the ext4 inside)
// instead of twice (also in the host file system's page cache). It is off because it measured
// slower for this workload on the test hosts (1 GiB volume, 3 rounds each): creating 20,000
// small files took the same (0.45–0.55 s either way), syncfs after it 0.31–0.36 s against
// 0.28–0.31 s buffered, and reading them back with cold caches 3.0–4.0 s against 0.9–1.8 s
// buffered (the host's readahead on the image file helps); only a 300 MB sequential write was
// faster (0.17 s against 0.26 s). The double caching costs memory the kernel can reclaim.
// TestCreateFilesFigures logs both modes. Tests switch it to compare.
var directIO = false

// loopBackedBy reports whether m is an ext4 mount, of its file system's root, on a loop device
// whose backing file is image. It also returns that device ("/dev/loopN").
func loopBackedBy(m mountEntry, image string) (string, bool) {
	if m.fstype != "ext4" || m.root != "/" {
		return "", false
	}
	sys := "/sys/dev/block/" + m.dev
	if !sameFile(backingFile(sys), image) {
		return "", false
	}
	target, err := os.Readlink(sys)
	if err != nil {
		return "", false
	}
	return "/dev/" + filepath.Base(target), true
}

// backingFile returns the backing file of the loop device whose sysfs directory is sys, or ""
// when it is no loop device or is not attached.
func backingFile(sys string) string {
	b, err := os.ReadFile(sys + "/loop/backing_file")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// sameFile reports whether paths a and b name the same existing file.
func sameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false
	}
	return os.SameFile(fa, fb)
}

// loopDevice is an attached loop device.
type loopDevice struct {
	name string // "loop3"
	dev  string // "7:3"
}

// loopsBackedBy returns the attached loop devices whose backing file is image.
func loopsBackedBy(image string) ([]loopDevice, error) {
	dirs, err := filepath.Glob("/sys/block/loop*")
	if err != nil {
		return nil, fmt.Errorf("volume: %w", err)
	}
	var out []loopDevice
	for _, d := range dirs {
		if !sameFile(backingFile(d), image) {
			continue
		}
		b, err := os.ReadFile(d + "/dev")
		if err != nil {
			continue
		}
		out = append(out, loopDevice{name: filepath.Base(d), dev: strings.TrimSpace(string(b))})
	}
	return out, nil
}

// checkImageFree returns a FailedPrecondition error when image is attached to a loop device
// that is mounted or otherwise held exclusively (in this or any other mount namespace):
// mounting the same ext4 twice would corrupt it.
func checkImageFree(image string) error {
	loops, err := loopsBackedBy(image)
	if err != nil {
		return err
	}
	for _, l := range loops {
		where, err := mountsOf(l.dev)
		if err != nil {
			return err
		}
		if len(where) > 0 {
			return fmt.Errorf("volume: image %s is already mounted from /dev/%s at %s: %w",
				image, l.name, strings.Join(where, ", "), errdefs.ErrFailedPrecondition)
		}
		f, err := os.OpenFile("/dev/"+l.name, os.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("volume: image %s is in use through /dev/%s (mounted in another mount namespace?): %w",
				image, l.name, errdefs.ErrFailedPrecondition)
		}
		if err == nil {
			f.Close()
		}
	}
	return nil
}

// attach attaches image to a free loop device with LOOP_CONFIGURE and LO_FLAGS_AUTOCLEAR, with
// discard off (see disableDiscard). It returns the device's path and an open descriptor of it:
// the caller closes that only after mounting, because an autoclear device with no opener and
// no mount detaches at once.
func attach(image string, log *slog.Logger) (string, *os.File, error) {
	return attachLoop(image, log, true)
}

// attachLoop is attach, with discard switched off on the device when noDiscard is set.
func attachLoop(image string, log *slog.Logger, noDiscard bool) (string, *os.File, error) {
	img, err := os.OpenFile(image, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("volume: open image: %w", err)
	}
	defer img.Close() // the loop device holds its own reference
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("volume: open /dev/loop-control (is the loop module loaded?): %w", err)
	}
	defer ctl.Close()

	flags := uint32(unix.LO_FLAGS_AUTOCLEAR)
	if directIO {
		flags |= unix.LO_FLAGS_DIRECT_IO
	}
	var lastErr error
	for attempt := 0; attempt < 10; attempt++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", nil, fmt.Errorf("volume: LOOP_CTL_GET_FREE: %w", err)
		}
		path := "/dev/loop" + strconv.Itoa(n)
		if err := ensureNode(path, n); err != nil {
			return "", nil, err
		}
		dev, err := os.OpenFile(path, os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", nil, fmt.Errorf("volume: open %s: %w", path, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(img.Fd())}
		cfg.Info.Flags = flags
		copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], image)
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if err == nil {
			if noDiscard {
				disableDiscard(n, log)
			}
			if directIO && !sysfsFlag(fmt.Sprintf("/sys/block/loop%d/loop/dio", n)) {
				log.Warn("loop device refused direct I/O, using buffered I/O", "device", path)
			}
			return path, dev, nil
		}
		dev.Close()
		if !errors.Is(err, unix.EBUSY) {
			return "", nil, fmt.Errorf("volume: LOOP_CONFIGURE %s with %s (needs Linux 5.8 or later): %w", path, image, err)
		}
		lastErr = err // another process took the device between GET_FREE and CONFIGURE
	}
	return "", nil, fmt.Errorf("volume: no free loop device after 10 tries: %w", lastErr)
}

// ensureNode makes sure the device node of loop device n exists. devtmpfs creates it when the
// kernel adds the device; under a static /dev (some containers) it is created here.
func ensureNode(path string, n int) error {
	for i := 0; i < 20; i++ {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	err := unix.Mknod(path, unix.S_IFBLK|0o600, int(unix.Mkdev(loopMajor, uint32(n))))
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("volume: create device node %s: %w", path, err)
	}
	return nil
}

// disableDiscard switches discard off on loop device n, so that neither ext4 nor fstrim can
// punch holes into the image and undo its reservation. Failure only costs the reservation's
// durability, so it is logged, not returned.
func disableDiscard(n int, log *slog.Logger) {
	p := fmt.Sprintf("/sys/block/loop%d/queue/discard_max_bytes", n)
	if err := os.WriteFile(p, []byte("0"), 0); err != nil {
		log.Warn("cannot switch discard off on the loop device; fstrim may make the image sparse",
			"path", p, "err", err)
	}
}

// sysfsFlag reads a sysfs file holding "0" or "1".
func sysfsFlag(p string) bool {
	b, err := os.ReadFile(p)
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// deviceBytes returns the size of block device dev ("/dev/loopN") in bytes.
func deviceBytes(dev string) (int64, error) {
	b, err := os.ReadFile("/sys/block/" + filepath.Base(dev) + "/size")
	if err != nil {
		return 0, fmt.Errorf("volume: size of %s: %w", dev, err)
	}
	sectors, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("volume: size of %s: %w", dev, err)
	}
	return sectors * 512, nil
}

// setCapacity makes loop device dev take up its backing file's current size.
func setCapacity(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("volume: open %s: %w", dev, err)
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_SET_CAPACITY, 0); err != nil {
		return fmt.Errorf("volume: LOOP_SET_CAPACITY %s: %w", dev, err)
	}
	return nil
}
