package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/rootfs"
	"github.com/hutchdev/hutch/internal/sandboxid"
	"github.com/hutchdev/hutch/internal/store"
)

// Directory mounts: a backup restored as a mount. Directory D of the sandbox becomes an
// overlay whose read-only layer is the backup's extracted tree on the host (shared by every
// sandbox that restored it) and whose writable layer is <sandbox dir>/mounts/<mountID>/upper,
// on the sandbox's disk. It is made on the host below the sandbox's root mount, which
// propagates it into the running container (rootfs.Mount), and recorded in the store
// (dir_mounts), so every later start (wake, restart, hutchd restart) mounts it again before the
// container starts: the restore persists like any other change to the disk. A restore costs a
// mount, not a copy, whatever the tree's size.

// TreeSource gives the host directory holding the extracted tree of a backup;
// internal/backup's tree cache implements it. Errors: BACKUP_NOT_FOUND when the backup is
// gone and its tree is not cached.
type TreeSource interface {
	Tree(ctx context.Context, backupID string) (string, error)
}

// ErrMountsUnsupported is MountBackup's error when the sandbox cannot take a directory mount
// (its root was mounted by an older hutchd without propagation, or it runs on gVisor); callers
// fall back to copying.
var ErrMountsUnsupported = errors.New("sandbox cannot take directory mounts until it restarts")

// MountBackup makes directory dir (absolute, clean, as the sandbox sees it) of sandbox id show
// the backup tree at host directory tree, starting the sandbox if it is not running. Symlinks
// in dir resolve inside the sandbox; missing directories are created. The resolved directory
// must be equal to or below one of roots. A directory mount already at the resolved path is
// replaced, and those below it are removed (the new one hides them), their changes discarded;
// the sandbox's own files that were in the directory stay on its disk, hidden. It returns the
// resolved directory. Errors: SANDBOX_NOT_FOUND, the start's errors,
// INVALID_BACKUP_CONFIG (context {dir, resolved, allowedRoots}: outside roots, or through a
// dangling symlink or a file), ErrMountsUnsupported, mount errors.
func (m *Manager) MountBackup(ctx context.Context, sid sandboxid.ID, dir, backupID, tree string, roots []string) (string, error) {
	id := sid.String()
	unlock := m.lock(id)
	defer unlock()
	rec, err := m.store.Get(ctx, id)
	if err != nil {
		return "", err
	}
	if err := m.ensureLocked(ctx, rec, nil); err != nil {
		return "", err
	}
	// gVisor's gofer does not see host mounts made below the root after the start; a copy
	// through the agent is the way (the mount is in place from the next start on otherwise).
	if rec.Runtime == RuntimeGVisor {
		return "", ErrMountsUnsupported
	}
	merged := filepath.Join(m.sandboxDir(id), "rootfs")
	if shared, err := rootfs.IsShared(merged); err != nil {
		return "", err
	} else if !shared {
		return "", ErrMountsUnsupported
	}
	f, resolved, err := openMountPoint(merged, dir, roots)
	if err != nil {
		return "", err
	}
	defer f.Close()
	old, err := m.store.DirMounts(ctx, id)
	if err != nil {
		return "", err
	}
	// Take down the mounts the new one replaces (at its path, then below it), each found by its
	// own source in mountinfo and checked by mount ID: never a mount that is not ours.
	replaced := false
	for i := len(old) - 1; i >= 0; i-- {
		o := old[i]
		if o.Path != resolved && !strings.HasPrefix(o.Path, resolved+"/") {
			continue
		}
		n, err := m.unmountDirMount(merged, o.MountID)
		if err != nil {
			return "", fmt.Errorf("replace mount at %s: %w", o.Path, err)
		}
		replaced = replaced || n > 0
	}
	if replaced {
		// The descriptor may name an old mount's root: open the directory below it again.
		f.Close()
		if f, resolved, err = openMountPoint(merged, resolved, roots); err != nil {
			return "", err
		}
	}
	if isRoot, err := rootfs.IsMountRoot(f); err != nil {
		return "", err
	} else if isRoot {
		if src, err := rootfs.MountSource(f); err != nil || !strings.HasPrefix(src, mountSourcePrefix) {
			return "", errdefs.Newf(errdefs.CodeInvalidBackupConfig, "dir %q is a mount point the sandbox needs: restore somewhere else", dir).
				With("dir", dir).With("resolved", resolved)
		}
	}
	mid, err := newMountID()
	if err != nil {
		return "", err
	}
	mdir := m.mountDir(id, mid)
	ns, err := userNSOf(rec)
	if err != nil {
		return "", err
	}
	if ns != nil {
		defer ns.Close()
	}
	if err := m.mountTree(f, id, mid, tree, ns); err != nil {
		os.RemoveAll(mdir)
		return "", err
	}
	gone, err := m.store.PutDirMount(ctx, store.DirMount{SandboxID: id, Path: resolved, BackupID: backupID, MountID: mid})
	if err != nil {
		if _, uerr := m.unmountDirMount(merged, mid); uerr != nil {
			m.log.WarnContext(ctx, "unmount unrecorded directory mount", "sandbox_id", id, "dir", resolved, "err", uerr)
		}
		os.RemoveAll(mdir)
		return "", err
	}
	for _, g := range gone {
		// A replaced mount the sandbox moved out of reach stays mounted until the sandbox stops;
		// its directories go with the sandbox then (Destroy) or stay unreferenced on its disk.
		if refs, err := rootfs.MountsBySource(merged, mountSourcePrefix+g.MountID); err == nil && len(refs) == 0 {
			if err := os.RemoveAll(m.mountDir(id, g.MountID)); err != nil {
				m.log.WarnContext(ctx, "remove replaced mount", "sandbox_id", id, "path", g.Path, "err", err)
			}
		}
	}
	m.touch(id)
	m.log.InfoContext(ctx, "backup mounted", "sandbox_id", id, "dir", resolved, "backup_id", backupID, "mount_id", mid)
	return resolved, nil
}

// mountSourcePrefix names hutchd's directory mounts in mountinfo: the source of a mount is
// mountSourcePrefix + its mount ID, unique per mount.
const mountSourcePrefix = "hutch-mount-"

// unmountDirMount detaches directory mount mid wherever it is below merged now, and returns
// how many mounts it detached.
func (m *Manager) unmountDirMount(merged, mid string) (int, error) {
	refs, err := rootfs.MountsBySource(merged, mountSourcePrefix+mid)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ref := range refs {
		ok, err := rootfs.UnmountRef(merged, ref)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// openMountPoint opens dir inside the sandbox root merged, creating its missing directories,
// and checks that it resolves under roots. The check runs before anything is created (on the
// longest existing ancestor, resolved, plus the missing rest) and again after.
func openMountPoint(merged, dir string, roots []string) (*os.File, string, error) {
	refuse := func(err error) error {
		switch {
		case errors.Is(err, unix.ENAMETOOLONG):
			return errdefs.Newf(errdefs.CodeNameTooLong, "dir %q: a name in it is too long", truncate(dir, 256)).With("dir", truncate(dir, 256))
		case errors.Is(err, rootfs.ErrDangling), errors.Is(err, fs.ErrNotExist), isNotDir(err), errors.Is(err, unix.ELOOP):
			return errdefs.Newf(errdefs.CodeInvalidBackupConfig, "dir %q cannot be a directory in the sandbox (a dangling symlink, a symlink loop or a file on the way)", truncate(dir, 256)).
				With("dir", truncate(dir, 256)).With("allowedRoots", roots)
		}
		return err
	}
	outside := func(resolved string) error {
		return errdefs.Newf(errdefs.CodeInvalidBackupConfig, "dir %q resolves to %q, which is not under an allowed root (%s)",
			truncate(dir, 256), truncate(resolved, 256), strings.Join(roots, ", ")).With("dir", truncate(dir, 256)).With("resolved", truncate(resolved, 256)).With("allowedRoots", roots)
	}
	// The longest existing ancestor, resolved; the missing rest will be plain directories.
	existing, rest := dir, ""
	for {
		g, resolved, err := rootfs.OpenDir(merged, existing, false)
		if err == nil {
			g.Close()
			if p := filepath.Join(resolved, rest); !within(p, roots) {
				return nil, "", outside(p)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || existing == "/" {
			return nil, "", refuse(err)
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = filepath.Dir(existing)
	}
	f, resolved, err := rootfs.OpenDir(merged, dir, true)
	if err != nil {
		return nil, "", refuse(err)
	}
	if !within(resolved, roots) { // the sandbox changed the path meanwhile
		f.Close()
		return nil, "", outside(resolved)
	}
	return f, resolved, nil
}

// truncate shortens s to at most n bytes for messages.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func isNotDir(err error) bool { return errors.Is(err, unix.ENOTDIR) }

func newMountID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("mount id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func (m *Manager) mountDir(id, mid string) string {
	return filepath.Join(m.diskDir(id), "mounts", mid)
}

func (m *Manager) touch(id string) {
	m.mu.RLock()
	inst := m.instances[id]
	m.mu.RUnlock()
	if inst != nil {
		inst.touch()
	}
}

// mountDirs mounts sandbox id's directory mounts below its root merged, parents first, before
// its container starts. A mount whose backup is gone for good (deleted, and its tree not
// cached) is dropped with an error in the log; other failures fail the start.
func (m *Manager) mountDirs(ctx context.Context, id, merged string, ns *os.File) error {
	ms, err := m.store.DirMounts(ctx, id)
	if err != nil || len(ms) == 0 {
		return err
	}
	src := m.trees
	if src == nil {
		return errdefs.New(errdefs.CodeUnavailable, "directory mounts are not available on this host")
	}
	for _, d := range ms {
		tree, err := src.Tree(ctx, d.BackupID)
		if errdefs.IsCode(err, errdefs.CodeBackupNotFound) {
			m.log.ErrorContext(ctx, "restored backup is gone: dropping its mount", "sandbox_id", id, "dir", d.Path, "backup_id", d.BackupID)
			if err := m.store.DeleteDirMount(ctx, id, d.Path); err != nil {
				m.log.ErrorContext(ctx, "drop the mount of a gone backup", "sandbox_id", id, "dir", d.Path, "err", err)
			}
			if err := os.RemoveAll(m.mountDir(id, d.MountID)); err != nil {
				m.log.WarnContext(ctx, "remove the mount of a gone backup", "sandbox_id", id, "dir", d.Path, "err", err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("mount %s: %w", d.Path, err)
		}
		// The recorded path was checked when the backup was restored; the sandbox may have
		// put a symlink on the way since. Mount only where the path still leads to itself.
		f, resolved, err := rootfs.OpenDir(merged, d.Path, true)
		if err != nil || resolved != d.Path {
			if f != nil {
				f.Close()
			}
			m.log.WarnContext(ctx, "restored directory not mounted: its path no longer leads to itself (a symlink or a file on the way); restore it again to use it",
				"sandbox_id", id, "dir", d.Path, "resolved", resolved, "err", err)
			continue
		}
		err = m.mountTree(f, id, d.MountID, tree, ns)
		f.Close()
		if err != nil {
			return fmt.Errorf("mount %s: %w", d.Path, err)
		}
	}
	return nil
}

// DirMountViews mounts a read-only view of each directory mount of sandbox id (its upper over
// its tree) in a private directory and returns path inside the sandbox → view directory, and
// the function that unmounts them. It reads no path the sandbox controls. Callers hold the
// sandbox still (Capture, or asleep).
func (m *Manager) dirMountViews(ctx context.Context, id string) (map[string]string, func(), error) {
	ms, err := m.store.DirMounts(ctx, id)
	if err != nil || len(ms) == 0 {
		return nil, func() {}, err
	}
	src := m.trees
	if src == nil {
		return nil, func() {}, errdefs.New(errdefs.CodeUnavailable, "directory mounts are not available on this host")
	}
	rec, err := m.store.Get(ctx, id)
	if err != nil {
		return nil, func() {}, err
	}
	ns, err := userNSOf(rec)
	if err != nil {
		return nil, func() {}, err
	}
	if ns != nil {
		defer ns.Close()
	}
	views := map[string]string{}
	var made []string
	cleanup := func() {
		for _, v := range made {
			if err := rootfs.Unmount(v); err != nil {
				m.log.ErrorContext(ctx, "unmount view", "path", v, "err", err)
			}
			os.Remove(v)
		}
	}
	for _, d := range ms {
		tree, err := src.Tree(ctx, d.BackupID)
		if err != nil {
			cleanup()
			return nil, func() {}, fmt.Errorf("view of %s: %w", d.Path, err)
		}
		mdir := m.mountDir(id, d.MountID)
		v := filepath.Join(mdir, "view")
		// Under a user namespace the tree is idmapped like the mount's upper, so the whole
		// view shows host IDs of the range (the snapshot shifts them back).
		err = rootfs.MapLowers(m.sandboxDir(id), []string{tree}, ns, func(mapped []string) error {
			return rootfs.MountReadOnly([]string{filepath.Join(mdir, "upper"), mapped[0]}, v)
		})
		if err != nil {
			cleanup()
			return nil, func() {}, err
		}
		made = append(made, v)
		views[d.Path] = v
	}
	return views, cleanup, nil
}

// dropDirMounts forgets every directory mount of sandbox id and removes their directories (the
// sandbox's container is gone: its disk is being reset).
func (m *Manager) dropDirMounts(ctx context.Context, id string) error {
	ms, err := m.store.DeleteDirMounts(ctx, id)
	if err != nil {
		return err
	}
	for _, d := range ms {
		if err := os.RemoveAll(m.mountDir(id, d.MountID)); err != nil {
			return fmt.Errorf("remove mount %s: %w", d.Path, err)
		}
	}
	return nil
}

// OpenDir opens directory dir (absolute, clean, as the sandbox sees it) of sandbox id for
// reading from the host, starting the sandbox if it is not running: symlinks in dir resolve
// inside the sandbox, and the resolved directory must be equal to or below one of roots. The
// returned os.Root confines every access below it, so the sandbox cannot steer a walk of it
// onto the host by swapping directories for symlinks meanwhile; it shows the sandbox's files,
// directory mounts included. The caller closes it. Errors:
// SANDBOX_NOT_FOUND, the start's errors, FILE_NOT_FOUND, NOT_DIRECTORY (context.path),
// INVALID_BACKUP_CONFIG (outside roots; context {dir, resolved, allowedRoots}).
func (m *Manager) OpenDir(ctx context.Context, sid sandboxid.ID, dir string, roots []string) (*os.Root, string, error) {
	id := sid.String()
	unlock := m.lock(id)
	defer unlock()
	rec, err := m.store.Get(ctx, id)
	if err != nil {
		return nil, "", err
	}
	if err := m.ensureLocked(ctx, rec, nil); err != nil {
		return nil, "", err
	}
	f, resolved, err := rootfs.OpenDir(filepath.Join(m.sandboxDir(id), "rootfs"), dir, false)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", errdefs.Newf(errdefs.CodeFileNotFound, "%s does not exist", truncate(dir, 256)).With("path", truncate(dir, 256))
	case isNotDir(err):
		return nil, "", errdefs.Newf(errdefs.CodeNotDirectory, "%s is not a directory", truncate(dir, 256)).With("path", truncate(dir, 256))
	case errors.Is(err, unix.ELOOP):
		return nil, "", errdefs.Newf(errdefs.CodeInvalidBackupConfig, "dir %q: a symlink loop on the way", truncate(dir, 256)).With("dir", truncate(dir, 256))
	case errors.Is(err, unix.ENAMETOOLONG):
		return nil, "", errdefs.Newf(errdefs.CodeNameTooLong, "dir %q: a name in it is too long", truncate(dir, 256)).With("dir", truncate(dir, 256))
	case err != nil:
		return nil, "", err
	}
	defer f.Close()
	if !within(resolved, roots) {
		return nil, "", errdefs.Newf(errdefs.CodeInvalidBackupConfig, "dir %q resolves to %q, which is not under an allowed root (%s)",
			dir, resolved, strings.Join(roots, ", ")).With("dir", dir).With("resolved", resolved).With("allowedRoots", roots)
	}
	root, err := os.OpenRoot(rootfs.FDPath(f))
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", dir, err)
	}
	m.touch(id)
	return root, resolved, nil
}

// within reports whether p is equal to or below one of roots.
func within(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// mountTree mounts directory mount mid of sandbox id (tree below its writable layer) at the
// open directory f; with a user namespace (ns) the tree is idmapped into the sandbox's range,
// so the writable layer, whose root takes the tree's root owner, is owned by the range too.
func (m *Manager) mountTree(f *os.File, id, mid, tree string, ns *os.File) error {
	mdir := m.mountDir(id, mid)
	return rootfs.MapLowers(m.sandboxDir(id), []string{tree}, ns, func(mapped []string) error {
		return rootfs.MountDir(f, mountSourcePrefix+mid, mapped[0], filepath.Join(mdir, "upper"), filepath.Join(mdir, "work"))
	})
}
