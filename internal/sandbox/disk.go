package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hutchdev/hutch/internal/datavol"
	"github.com/hutchdev/hutch/internal/store"
)

// Disk quota. With Config.DiskQuota, a sandbox's disk (its overlay upper and work directories
// and the writable layers of its directory mounts, mounts/) lives in a file system of its own:
// a sparse ext4 image of its instance type's DiskBytes, <sandbox dir>/disk.img, loop-mounted at
// <sandbox dir>/disk (datavol.Disk). Writes past the size fail with ENOSPC inside the sandbox;
// the data volume gives up at most that size.
//
// The image is made at the sandbox's first start and mounted at every start (wake, restart,
// a start after hutchd's restart) before the overlay; teardown (sleep, stop, destroy, a failed
// start, recovery) unmounts it after the overlay, so a sleeping sandbox holds no loop device
// and no mount. A re-adopted running sandbox's disk stays mounted (hutchd never unmounts it on
// exit) and is mounted again if it is not. Host-side readers of a sandbox that is not running
// (Capture, the sleep snapshot) mount it for their duration (holdDisk); a reset of the disk
// (ResetDisk) removes the image, and the next start makes a new one.
//
// Sandboxes made without a quota (before quotas, or with DiskQuota off) keep their disk in the
// sandbox directory itself, <sandbox dir>/{upper,work,mounts}, without a limit; a disk reset
// moves them onto an image when quotas are on. A sandbox with an image always uses it, even
// when DiskQuota is off now.

// diskOf returns sandbox id's disk image and mountpoint.
func (m *Manager) diskOf(id string) datavol.Disk {
	dir := m.sandboxDir(id)
	return datavol.Disk{Image: filepath.Join(dir, "disk.img"), Mountpoint: filepath.Join(dir, "disk")}
}

// diskDir returns the directory that holds sandbox id's upper, work and mounts directories: the
// disk's mountpoint when it has an image, else the sandbox directory.
func (m *Manager) diskDir(id string) string {
	d := m.diskOf(id)
	if ok, err := d.Exists(); err == nil && ok {
		return d.Mountpoint
	}
	return m.sandboxDir(id)
}

// upperDir returns sandbox id's overlay upper directory (its own changes).
func (m *Manager) upperDir(id string) string { return filepath.Join(m.diskDir(id), "upper") }

// prepareDisk makes sure rec's disk is ready for a start and returns the directory for its
// upper, work and mounts directories: its image is made (with DiskQuota, for a sandbox that
// has neither an image nor a disk from before quotas) and mounted.
func (m *Manager) prepareDisk(ctx context.Context, rec store.Sandbox, sizeBytes int64) (string, error) {
	d := m.diskOf(rec.ID)
	ok, err := d.Exists()
	if err != nil {
		return "", err
	}
	if !ok {
		legacy := false
		if _, err := os.Lstat(filepath.Join(m.sandboxDir(rec.ID), "upper")); err == nil {
			legacy = true
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("sandbox disk: %w", err)
		}
		if !m.cfg.DiskQuota || legacy {
			return m.sandboxDir(rec.ID), nil
		}
		if err := os.MkdirAll(m.sandboxDir(rec.ID), 0o700); err != nil {
			return "", fmt.Errorf("sandbox dir: %w", err)
		}
		if err := d.Create(ctx, sizeBytes); err != nil {
			return "", fmt.Errorf("sandbox disk: %w", err)
		}
		m.log.InfoContext(ctx, "sandbox disk created", "sandbox_id", rec.ID, "bytes", sizeBytes)
	}
	if _, err := d.Mount(ctx, m.log); err != nil {
		return "", fmt.Errorf("sandbox disk: %w", err)
	}
	return d.Mountpoint, nil
}

// holdDisk mounts sandbox id's disk, if it has an image and it is not mounted, for a host-side
// reader of a sandbox that is not running, and returns the function that unmounts it again
// (only if holdDisk mounted it). The caller holds the ID lock.
func (m *Manager) holdDisk(ctx context.Context, id string) (func(), error) {
	d := m.diskOf(id)
	if ok, err := d.Exists(); err != nil || !ok {
		return func() {}, err
	}
	mounted, err := d.Mount(ctx, m.log)
	if err != nil {
		return func() {}, fmt.Errorf("sandbox disk: %w", err)
	}
	if !mounted {
		return func() {}, nil
	}
	return func() {
		if err := d.Unmount(m.log); err != nil {
			m.log.ErrorContext(ctx, "unmount sandbox disk", "sandbox_id", id, "err", err)
		}
	}, nil
}

// unmountDisk unmounts sandbox id's disk if it is mounted (teardown, after the overlay).
func (m *Manager) unmountDisk(id string) error {
	if err := m.diskOf(id).Unmount(m.log); err != nil {
		return fmt.Errorf("sandbox disk: %w", err)
	}
	return nil
}
