package datavol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

// requirePrivileged skips t unless it runs as root with loop devices and e2fsprogs.
func requirePrivileged(t *testing.T) {
	t.Helper()
	testutil.RequiresRoot(t, "attaches loop devices and mounts")
	for _, tool := range []string{"mkfs.ext4", "e2fsck", "resize2fs"} {
		if _, err := lookPath(tool); err != nil {
			t.Skipf("needs %s (e2fsprogs)", tool)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("needs /dev/loop-control (loop driver)")
	}
}

// testEnv is a directory for images and mountpoints whose mounts and loop devices are all
// gone when the test ends.
type testEnv struct {
	t   *testing.T
	dir string
	log *slog.Logger
}

func newEnv(t *testing.T) *testEnv {
	t.Helper()
	requirePrivileged(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, dir: dir, log: slog.New(slog.NewTextHandler(t.Output(), nil))}
	// Registered after TempDir, so it runs before the directory is removed.
	t.Cleanup(e.cleanup)
	return e
}

func (e *testEnv) cleanup() {
	all, err := mounts()
	if err != nil {
		e.t.Error(err)
		return
	}
	var under []string
	for _, m := range all {
		if strings.HasPrefix(m.mountpoint, e.dir+"/") {
			under = append(under, m.mountpoint)
		}
	}
	sort.Slice(under, func(i, j int) bool { return len(under[i]) > len(under[j]) })
	for _, p := range under {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			e.t.Errorf("cleanup: unmount %s: %v", p, err)
		}
	}
	if left := e.waitLoopsGone(); len(left) > 0 {
		e.t.Errorf("cleanup: loop devices still attached to images of the test: %v", left)
	}
}

// loops returns the loop devices whose backing file lies in the test's directory.
func (e *testEnv) loops() []string {
	dirs, _ := filepath.Glob("/sys/block/loop*")
	var out []string
	for _, d := range dirs {
		if strings.HasPrefix(backingFile(d), e.dir+"/") {
			out = append(out, filepath.Base(d))
		}
	}
	return out
}

// waitLoopsGone waits for autoclear to detach the test's loop devices, which the kernel does
// asynchronously after the last unmount, and returns those still attached after 10 s.
func (e *testEnv) waitLoopsGone() []string {
	var left []string
	testutil.Poll(e.t, 20*time.Millisecond, 10*time.Second, func() bool { left = e.loops(); return len(left) == 0 })
	return left
}

func (e *testEnv) config(name string, size int64) Config {
	return Config{
		Image:      filepath.Join(e.dir, "images", name+".img"),
		Mountpoint: filepath.Join(e.dir, "mnt", name),
		Size:       size,
	}
}

func (e *testEnv) ensure(cfg Config) *Volume {
	e.t.Helper()
	v, err := Ensure(context.Background(), cfg, e.log)
	if err != nil {
		e.t.Fatalf("Ensure(%+v): %v", cfg, err)
	}
	return v
}

// mountCount returns how many mounts sit at exactly path.
func mountCount(t *testing.T, path string) int {
	t.Helper()
	all, err := mounts()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range all {
		if m.mountpoint == path {
			n++
		}
	}
	return n
}

func mustStats(t *testing.T, v *Volume) Stats {
	t.Helper()
	st, err := v.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestEnsureCreatesMountsAndUnmounts(t *testing.T) {
	e := newEnv(t)
	cfg := e.config("data", 64<<20)
	v := e.ensure(cfg)

	if v.Path() != cfg.Mountpoint || v.Image() != cfg.Image {
		t.Errorf("Path, Image = %q, %q; want %q, %q", v.Path(), v.Image(), cfg.Mountpoint, cfg.Image)
	}
	if !regexp.MustCompile(`^/dev/loop[0-9]+$`).MatchString(v.Device()) {
		t.Errorf("Device = %q, want /dev/loopN", v.Device())
	}
	m, ok, err := mountAt(cfg.Mountpoint)
	if err != nil || !ok || m.fstype != "ext4" {
		t.Fatalf("mount at %s = %+v, %v, %v; want ext4", cfg.Mountpoint, m, ok, err)
	}
	if _, err := os.Stat(cfg.Image + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s.tmp left behind: %v", cfg.Image, err)
	}

	// The image is fully allocated, not sparse.
	var st unix.Stat_t
	if err := unix.Stat(cfg.Image, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 64<<20 || st.Blocks*512 < st.Size {
		t.Errorf("image size %d, allocated %d; want 64 MiB, fully allocated", st.Size, st.Blocks*512)
	}
	name := filepath.Base(v.Device())
	if b, _ := os.ReadFile("/sys/block/" + name + "/queue/discard_max_bytes"); strings.TrimSpace(string(b)) != "0" {
		t.Errorf("discard_max_bytes = %q, want 0 (discard off)", b)
	}
	if !sysfsFlag("/sys/block/" + name + "/loop/autoclear") {
		t.Error("loop device lacks autoclear")
	}

	// Files can be written and read back.
	for i := range 100 {
		p := filepath.Join(v.Path(), "dir", fmt.Sprintf("f%03d", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(v.Path(), "dir", "f042")); err != nil || !strings.HasSuffix(string(b), "/dir/f042") {
		t.Errorf("read back = %q, %v", b, err)
	}

	s := mustStats(t, v)
	if s.SizeBytes < 48<<20 || s.SizeBytes > 64<<20 || s.FreeBytes == 0 || s.FreeBytes > s.SizeBytes {
		t.Errorf("Stats = %+v; want size in (48 MiB, 64 MiB], 0 < free <= size", s)
	}
	// -i 8192: one inode per 8 KiB.
	if want := uint64(64<<20) / 8192; s.Inodes != want || s.InodesFree >= s.Inodes {
		t.Errorf("Stats inodes = %d (free %d), want %d (fewer free)", s.Inodes, s.InodesFree, want)
	}

	if err := v.Unmount(); err != nil {
		t.Fatal(err)
	}
	if n := mountCount(t, cfg.Mountpoint); n != 0 {
		t.Errorf("%d mounts left at %s after Unmount", n, cfg.Mountpoint)
	}
	if left := e.waitLoopsGone(); len(left) > 0 {
		t.Errorf("loop devices still attached after Unmount: %v", left)
	}
	if err := v.Unmount(); err != nil {
		t.Errorf("second Unmount: %v, want nil", err)
	}
}

func TestEnsureIsIdempotent(t *testing.T) {
	e := newEnv(t)
	cfg := e.config("data", 64<<20)
	v1 := e.ensure(cfg)
	if err := os.WriteFile(filepath.Join(v1.Path(), "marker"), []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	v2 := e.ensure(cfg)
	if v2.Device() != v1.Device() {
		t.Errorf("second Ensure: device %s, want the first's %s", v2.Device(), v1.Device())
	}
	if n := mountCount(t, cfg.Mountpoint); n != 1 {
		t.Errorf("%d mounts at %s, want 1", n, cfg.Mountpoint)
	}
	if b, err := os.ReadFile(filepath.Join(v2.Path(), "marker")); err != nil || string(b) != "one" {
		t.Errorf("marker = %q, %v", b, err)
	}
	if n := len(e.loops()); n != 1 {
		t.Errorf("%d loop devices attached to the image, want 1", n)
	}
}

func TestEnsureRemountsWithDataIntact(t *testing.T) {
	e := newEnv(t)
	cfg := e.config("data", 64<<20)
	v := e.ensure(cfg)
	want := bytes.Repeat([]byte("hutch "), 100000)
	if err := os.WriteFile(filepath.Join(v.Path(), "big"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := v.Unmount(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Mountpoint, "big")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file visible after Unmount: %v", err)
	}
	if left := e.waitLoopsGone(); len(left) > 0 {
		t.Fatalf("loop devices still attached after Unmount: %v", left)
	}
	v = e.ensure(cfg)
	got, err := os.ReadFile(filepath.Join(v.Path(), "big"))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("after remount: %d bytes, %v; want the %d written", len(got), err, len(want))
	}
}

func TestEnsureGrows(t *testing.T) {
	e := newEnv(t)
	cfg := e.config("data", 64<<20)
	v := e.ensure(cfg)
	small := mustStats(t, v)
	if err := os.WriteFile(filepath.Join(v.Path(), "keep"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}

	// While mounted: the image and the device grow at once, the file system online when the
	// process may (CAP_SYS_RESOURCE), else at the next mount. No new device, no second mount.
	cfg.Size = 128 << 20
	v2 := e.ensure(cfg)
	if v2.Device() != v.Device() || mountCount(t, cfg.Mountpoint) != 1 {
		t.Errorf("grow while mounted changed the device (%s → %s) or stacked a mount", v.Device(), v2.Device())
	}
	if n, err := deviceBytes(v2.Device()); err != nil || n != 128<<20 {
		t.Errorf("device size after growing the image: %d, %v; want 128 MiB", n, err)
	}
	mounted := mustStats(t, v2)
	if hasCapSysResource() {
		if mounted.SizeBytes < small.SizeBytes+56<<20 || mounted.Inodes <= small.Inodes {
			t.Errorf("after growing to 128 MiB online: %+v, before %+v", mounted, small)
		}
	} else if mounted.SizeBytes != small.SizeBytes {
		t.Errorf("without CAP_SYS_RESOURCE the mounted file system changed size: %+v, before %+v", mounted, small)
	}

	// At the next mount the file system fills the image (finishing a deferred grow, or one a
	// crash interrupted), and a larger Size grows it offline.
	for _, size := range []int64{128 << 20, 192 << 20} {
		if err := v2.Unmount(); err != nil {
			t.Fatal(err)
		}
		e.waitLoopsGone()
		cfg.Size = size
		v2 = e.ensure(cfg)
		got := mustStats(t, v2)
		// Inodes grow by whole block groups (128 MiB, 16,384 inodes each), so not in step.
		if got.SizeBytes < uint64(size-size/8) || got.Inodes < small.Inodes {
			t.Errorf("after mounting with size %d MiB: %+v", size>>20, got)
		}
		if fi, err := os.Stat(cfg.Image); err != nil || fi.Size() != size {
			t.Errorf("image after growing: %v, %v", fi, err)
		}
	}
	grown := mustStats(t, v2)

	// A smaller Size never shrinks.
	cfg.Size = 64 << 20
	v4 := e.ensure(cfg)
	if s := mustStats(t, v4); s.SizeBytes != grown.SizeBytes {
		t.Errorf("Ensure with a smaller size changed the size: %d → %d", grown.SizeBytes, s.SizeBytes)
	}
	if b, err := os.ReadFile(filepath.Join(v4.Path(), "keep")); err != nil || string(b) != "kept" {
		t.Errorf("data after growing: %q, %v", b, err)
	}
}

func TestEnsureRefusesForeignMount(t *testing.T) {
	e := newEnv(t)
	cfg := e.config("data", 64<<20)
	if err := os.MkdirAll(cfg.Mountpoint, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", cfg.Mountpoint, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	_, err := Ensure(context.Background(), cfg, e.log)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Ensure over a tmpfs: %v, want FailedPrecondition", err)
	}
	t.Log(err)
	if n := mountCount(t, cfg.Mountpoint); n != 1 {
		t.Errorf("%d mounts at %s, want the tmpfs alone", n, cfg.Mountpoint)
	}
	if _, err := os.Stat(cfg.Image); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("image created although refused: %v", err)
	}
}

func TestEnsureRefusesImageMountedElsewhere(t *testing.T) {
	e := newEnv(t)
	cfg := e.config("data", 64<<20)
	e.ensure(cfg)
	other := cfg
	other.Mountpoint = filepath.Join(e.dir, "mnt", "other")
	_, err := Ensure(context.Background(), other, e.log)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Ensure of a mounted image at another place: %v, want FailedPrecondition", err)
	}
	t.Log(err)
	if n := mountCount(t, other.Mountpoint); n != 0 {
		t.Errorf("%d mounts at %s, want none", n, other.Mountpoint)
	}
	if n := len(e.loops()); n != 1 {
		t.Errorf("%d loop devices attached to the image, want 1", n)
	}
}

func TestEnsureNoSpace(t *testing.T) {
	e := newEnv(t)
	small := filepath.Join(e.dir, "small")
	if err := os.MkdirAll(small, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", small, "tmpfs", 0, "size=100m"); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Image: filepath.Join(small, "data.img"), Mountpoint: filepath.Join(e.dir, "mnt"), Size: 256 << 20}

	// Creating: nothing left behind.
	_, err := Ensure(context.Background(), cfg, e.log)
	if !errors.Is(err, errdefs.ErrResourceExhausted) || errdefs.CodeOf(err) != errdefs.CodeNoSpace {
		t.Fatalf("Ensure of a 256 MiB image on a 100 MiB tmpfs: %v (code %s), want ResourceExhausted NO_SPACE", err, errdefs.CodeOf(err))
	}
	t.Log(err)
	if ents, _ := os.ReadDir(small); len(ents) != 0 {
		t.Errorf("left behind in %s: %v", small, ents)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(small, &st); err != nil || st.Bfree != st.Blocks {
		t.Errorf("tmpfs not empty after the failure: %d of %d blocks free, %v", st.Bfree, st.Blocks, err)
	}

	// Growing: the mounted volume and its image stay as they were.
	cfg.Size = 64 << 20
	v := e.ensure(cfg)
	cfg.Size = 256 << 20
	_, err = Ensure(context.Background(), cfg, e.log)
	if errdefs.CodeOf(err) != errdefs.CodeNoSpace {
		t.Fatalf("growing beyond the host file system: %v, want NO_SPACE", err)
	}
	if fi, err := os.Stat(cfg.Image); err != nil || fi.Size() != 64<<20 {
		t.Errorf("image after the failed grow: %v, %v; want 64 MiB", fi, err)
	}
	if err := os.WriteFile(filepath.Join(v.Path(), "still"), []byte("works"), 0o644); err != nil {
		t.Errorf("volume unusable after the failed grow: %v", err)
	}
}

func TestEnsureRedoesUnfinishedImage(t *testing.T) {
	e := newEnv(t)
	cfg := e.config("data", 64<<20)
	if err := os.MkdirAll(filepath.Dir(cfg.Image), 0o755); err != nil {
		t.Fatal(err)
	}
	// What a crash during mkfs leaves: a .tmp and no image.
	if err := os.WriteFile(cfg.Image+".tmp", []byte("half an image"), 0o600); err != nil {
		t.Fatal(err)
	}
	v := e.ensure(cfg)
	if _, err := os.Stat(cfg.Image + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf(".tmp still there: %v", err)
	}
	if err := os.WriteFile(filepath.Join(v.Path(), "ok"), nil, 0o644); err != nil {
		t.Error(err)
	}
}

func TestEnsureRefusesDamagedFileSystem(t *testing.T) {
	e := newEnv(t)
	cfg := e.config("data", 64<<20)
	v := e.ensure(cfg)
	if err := v.Unmount(); err != nil {
		t.Fatal(err)
	}
	e.waitLoopsGone()
	// Zero the primary superblock.
	f, err := os.OpenFile(cfg.Image, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(make([]byte, 1024), 1024)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	_, err = Ensure(context.Background(), cfg, e.log)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "e2fsck -f") {
		t.Fatalf("Ensure of a damaged image: %v, want FailedPrecondition naming e2fsck -f", err)
	}
	t.Log(err)
	if n := mountCount(t, cfg.Mountpoint); n != 0 {
		t.Errorf("%d mounts at %s, want none", n, cfg.Mountpoint)
	}
	if left := e.loops(); len(left) != 0 {
		t.Errorf("loop devices left attached: %v", left)
	}
}

func TestEnsureRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "data.img")
	mnt := filepath.Join(dir, "mnt")
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"relative image", Config{Image: "data.img", Mountpoint: mnt, Size: 64 << 20}},
		{"relative mountpoint", Config{Image: img, Mountpoint: "mnt", Size: 64 << 20}},
		{"root mountpoint", Config{Image: img, Mountpoint: "/", Size: 64 << 20}},
		{"image under mountpoint", Config{Image: filepath.Join(mnt, "x.img"), Mountpoint: mnt, Size: 64 << 20}},
		{"negative size", Config{Image: img, Mountpoint: mnt, Size: -1}},
		{"missing image, no size", Config{Image: img, Mountpoint: mnt}},
		{"missing image, too small", Config{Image: img, Mountpoint: mnt, Size: 1 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Ensure(context.Background(), tc.cfg, nil)
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("Ensure(%+v) = %v, want InvalidArgument", tc.cfg, err)
			}
			if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("image created: %v", err)
			}
		})
	}
}

func TestParseMountinfo(t *testing.T) {
	in := "22 27 0:21 / /proc rw,relatime - proc proc rw\n" +
		"90 27 7:3 / /var/lib/hutch\\040data rw,relatime shared:50 master:1 - ext4 /dev/loop3 rw\n" +
		"bad line\n"
	got, err := parseMountinfo(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []mountEntry{
		{dev: "0:21", root: "/", mountpoint: "/proc", fstype: "proc", source: "proc"},
		{dev: "7:3", root: "/", mountpoint: "/var/lib/hutch data", fstype: "ext4", source: "/dev/loop3"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("parseMountinfo = %+v, want %+v", got, want)
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"4096", 4096, true},
		{"0", 0, true},
		{"512M", 512 << 20, true},
		{"16G", 16 << 30, true},
		{"16g", 16 << 30, true},
		{"16GiB", 16 << 30, true},
		{"16Gi", 16 << 30, true},
		{"16GB", 16 << 30, true},
		{"1T", 1 << 40, true},
		{"2P", 2 << 50, true},
		{"64K", 64 << 10, true},
		{"100B", 100, true},
		{" 8G\n", 8 << 30, true},
		{"8191P", 8191 << 50, true},
		{"8192P", 0, false},
		{"99999999999999999999", 0, false},
		{"", 0, false},
		{"G", 0, false},
		{"-1G", 0, false},
		{"+1G", 0, false},
		{"1.5G", 0, false},
		{"16 G", 0, false},
		{"16X", 0, false},
		{"16GBi", 0, false},
		{"16iB", 0, false},
	} {
		got, err := ParseSize(tc.in)
		if tc.ok && (err != nil || got != tc.want) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
		if !tc.ok && !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ParseSize(%q) = %d, %v; want InvalidArgument", tc.in, got, err)
		}
	}
}

// TestEnsureAddsLoopDevices mounts one volume more than there are loop devices: the last
// one gets a device LOOP_CTL_GET_FREE creates. The devices it created are removed at the end.
func TestEnsureAddsLoopDevices(t *testing.T) {
	e := newEnv(t)
	before, _ := filepath.Glob("/sys/block/loop*")
	if len(before) > 16 {
		t.Skipf("%d loop devices exist; exhausting them would take too many images", len(before))
	}
	existed := map[string]bool{}
	for _, d := range before {
		existed[filepath.Base(d)] = true
	}
	// Cleanups run last-in first-out: this one unmounts first (e.cleanup is idempotent), then
	// removes the devices the test made the kernel add.
	t.Cleanup(func() {
		e.cleanup()
		ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer ctl.Close()
		after, _ := filepath.Glob("/sys/block/loop*")
		for _, d := range after {
			var n int
			name := filepath.Base(d)
			if existed[name] || backingFile(d) != "" {
				continue
			}
			if _, err := fmt.Sscanf(name, "loop%d", &n); err != nil {
				continue
			}
			if err := unix.IoctlSetInt(int(ctl.Fd()), unix.LOOP_CTL_REMOVE, n); err != nil {
				t.Logf("remove %s: %v", name, err)
			}
		}
	})
	seen := map[string]bool{}
	for i := range len(before) + 1 {
		v := e.ensure(e.config(fmt.Sprintf("v%d", i), MinSize))
		if seen[v.Device()] {
			t.Fatalf("device %s handed out twice", v.Device())
		}
		seen[v.Device()] = true
	}
	if n := len(e.loops()); n != len(before)+1 {
		t.Errorf("%d loop devices attached, want %d", n, len(before)+1)
	}
}
