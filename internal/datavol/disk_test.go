package datavol

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
)

func (e *testEnv) disk(name string) Disk {
	return Disk{Image: filepath.Join(e.dir, name+".img"), Mountpoint: filepath.Join(e.dir, name)}
}

// allocated returns the bytes a file takes on its file system (st_blocks).
func allocated(t *testing.T, p string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// writeUntilFull writes 1 MiB chunks to p until the write fails and returns how much was
// written and the error.
func writeUntilFull(t *testing.T, p string, limit int64) (int64, error) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte{0x5a}, 1<<20)
	var n int64
	for n < limit {
		w, err := f.Write(chunk)
		n += int64(w)
		if err != nil {
			return n, err
		}
	}
	return n, f.Sync()
}

// A disk's lifecycle: created sparse, mounted, full at its size (ENOSPC) while its host file
// system gives up no more than the size, unmounted with its loop device gone, mounted again
// with its data, removed.
func TestDiskLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d := e.disk("sb")
	const size = 64 << 20
	if err := d.Create(ctx, size); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(d.Image)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != size {
		t.Errorf("image is %d bytes, want %d", fi.Size(), size)
	}
	if a := allocated(t, d.Image); a > size/4 {
		t.Errorf("new image takes %d bytes of %d: not sparse", a, size)
	}
	if err := d.Create(ctx, 2*size); err != nil { // exists: left as it is
		t.Fatal(err)
	}
	if fi, _ := os.Stat(d.Image); fi.Size() != size {
		t.Errorf("Create on an existing image changed its size to %d", fi.Size())
	}

	var hostBefore unix.Statfs_t
	if err := unix.Statfs(e.dir, &hostBefore); err != nil {
		t.Fatal(err)
	}
	if mounted, err := d.Mount(ctx, e.log); err != nil || !mounted {
		t.Fatalf("Mount: %v, %v", mounted, err)
	}
	if mounted, err := d.Mount(ctx, e.log); err != nil || mounted {
		t.Fatalf("second Mount: %v, %v (want no new mount)", mounted, err)
	}
	if n := mountCount(t, d.Mountpoint); n != 1 {
		t.Fatalf("%d mounts at %s, want 1", n, d.Mountpoint)
	}
	// A set-user-ID file or a device node the sandbox leaves on its disk gives the host nothing.
	var st unix.Statfs_t
	if err := unix.Statfs(d.Mountpoint, &st); err != nil {
		t.Fatal(err)
	}
	if st.Flags&unix.ST_NOSUID == 0 || st.Flags&unix.ST_NODEV == 0 {
		t.Errorf("disk mount flags %#x: want nosuid and nodev", st.Flags)
	}
	if err := os.WriteFile(filepath.Join(d.Mountpoint, "keep"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := writeUntilFull(t, filepath.Join(d.Mountpoint, "fill"), 2*size)
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("writing %d bytes into a %d-byte disk: %v, want ENOSPC", n, size, err)
	}
	if n > size || n < size/2 {
		t.Errorf("%d bytes fit in a %d-byte disk", n, size)
	}
	if err := syncPath(d.Mountpoint); err != nil {
		t.Fatal(err)
	}
	var hostAfter unix.Statfs_t
	if err := unix.Statfs(e.dir, &hostAfter); err != nil {
		t.Fatal(err)
	}
	if a := allocated(t, d.Image); a > size+1<<20 {
		t.Errorf("the full image takes %d bytes, more than its size %d", a, size)
	}
	// Allow 16 MiB of other activity on the host's file system.
	if lost := (int64(hostBefore.Bavail) - int64(hostAfter.Bavail)) * hostBefore.Bsize; lost > size+16<<20 {
		t.Errorf("the host file system lost %d bytes for a %d-byte disk", lost, size)
	}
	if err := os.Remove(filepath.Join(d.Mountpoint, "fill")); err != nil {
		t.Fatal(err)
	}

	if err := d.Unmount(e.log); err != nil {
		t.Fatal(err)
	}
	if err := d.Unmount(e.log); err != nil {
		t.Fatalf("second Unmount: %v", err)
	}
	if mounted, err := d.Mounted(); err != nil || mounted {
		t.Fatalf("after Unmount: mounted %v, %v", mounted, err)
	}
	if left := e.waitLoopsGone(); len(left) > 0 {
		t.Fatalf("loop devices left after Unmount: %v", left)
	}

	if _, err := d.Mount(ctx, e.log); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(d.Mountpoint, "keep")); err != nil || string(b) != "kept" {
		t.Fatalf("after a remount: %q, %v", b, err)
	}
	if err := d.Remove(e.log); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{d.Image, d.Mountpoint} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Remove: %v", p, err)
		}
	}
	if left := e.waitLoopsGone(); len(left) > 0 {
		t.Fatalf("loop devices left after Remove: %v", left)
	}
}

// A disk detached lazily while something still holds it keeps its loop device; mounting it
// again reuses that device (one file system, never two on one image).
func TestDiskMountReusesAttachedDevice(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d := e.disk("busy")
	if err := d.Create(ctx, 32<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Mount(ctx, e.log); err != nil {
		t.Fatal(err)
	}
	held, err := os.Create(filepath.Join(d.Mountpoint, "held"))
	if err != nil {
		t.Fatal(err)
	}
	// A busy disk: Unmount detaches it lazily.
	if _, err := held.WriteString("one"); err != nil {
		t.Fatal(err)
	}
	if err := d.Unmount(e.log); err != nil {
		t.Fatal(err)
	}
	before := e.loops()
	if len(before) != 1 {
		t.Fatalf("loop devices while a detached disk is held: %v, want one", before)
	}
	if _, err := d.Mount(ctx, e.log); err != nil {
		t.Fatal(err)
	}
	if after := e.loops(); len(after) != 1 || after[0] != before[0] {
		t.Fatalf("after the remount: loop devices %v, want %v reused", after, before)
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(d.Mountpoint, "held")); err != nil || string(b) != "one" {
		t.Fatalf("the held file through the new mount: %q, %v", b, err)
	}
	if err := d.Remove(e.log); err != nil {
		t.Fatal(err)
	}
	if left := e.waitLoopsGone(); len(left) > 0 {
		t.Fatalf("loop devices left: %v", left)
	}
}

func TestDiskRefusesForeignMountAndBadInput(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d := e.disk("foreign")
	if err := d.Create(ctx, 32<<20); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(d.Mountpoint, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", d.Mountpoint, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Mount(ctx, e.log); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Mount over a tmpfs: %v, want FailedPrecondition", err)
	}
	if err := d.Unmount(e.log); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Unmount of a tmpfs: %v, want FailedPrecondition", err)
	}
	if err := unix.Unmount(d.Mountpoint, 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		d    Disk
		size int64
	}{
		{"relative image", Disk{Image: "x.img", Mountpoint: e.dir + "/x"}, 32 << 20},
		{"relative mountpoint", Disk{Image: e.dir + "/x.img", Mountpoint: "x"}, 32 << 20},
		{"too small", Disk{Image: e.dir + "/x.img", Mountpoint: e.dir + "/x"}, MinDiskSize - 1},
	} {
		if err := tc.d.Create(ctx, tc.size); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
			t.Errorf("%s: Create: %v, want INVALID_ARGUMENT", tc.name, err)
		}
	}
	if _, err := (Disk{Image: e.dir + "/missing.img", Mountpoint: e.dir + "/missing"}).Mount(ctx, e.log); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Mount of a missing image: %v, want not exist", err)
	}
}
