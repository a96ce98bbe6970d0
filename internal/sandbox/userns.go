package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/idmap"
	"github.com/hutchdev/hutch/internal/rootfs"
	"github.com/hutchdev/hutch/internal/sandboxid"
	"github.com/hutchdev/hutch/internal/store"
)

// User namespaces (Config.UserNS). A runc sandbox created with one has an ID range of its own
// (store: IDBase, IDRangeSize IDs, kept for the sandbox's life, released with its record):
// root inside is host ID IDBase. Its disk stores host IDs (in-sandbox n = IDBase+n): the
// upper directory and the writable layers of directory mounts are owned by the range, so a
// file made inside, setuid ones included, never belongs to a host user. The shared trees below
// (image, snapshot layers, backup trees) keep in-sandbox IDs and are shown shifted through
// idmapped mounts, so no sandbox copies or chowns the image. Host-side readers of the disk
// (snapshots, backups) shift owners back to in-sandbox IDs; see Disk.IDMap and the backup's
// owner mapping.

// idMapOf returns rec's ID range: the zero Map for a sandbox without a user namespace.
func idMapOf(rec store.Sandbox) idmap.Map { return rec.IDMap() }

// IDMap returns sandbox id's ID range (the zero Map without a user namespace): what host-side
// readers of its disk (backups) shift owners with. Errors: SANDBOX_NOT_FOUND.
func (m *Manager) IDMap(ctx context.Context, sid sandboxid.ID) (idmap.Map, error) {
	id := sid.String()
	rec, err := m.store.Get(ctx, id)
	if err != nil {
		return idmap.Map{}, err
	}
	return rec.IDMap(), nil
}

// userNSOf returns an open user namespace carrying rec's range for idmapped mounts, or nil
// for a sandbox without one. The caller closes it.
func userNSOf(rec store.Sandbox) (*os.File, error) {
	idm := idMapOf(rec)
	if !idm.Enabled() {
		return nil, nil
	}
	ns, err := idm.UserNS()
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", rec.ID, err)
	}
	return ns, nil
}

// mountRoot mounts rec's root overlay at merged (lower: JoinLower'd layers and image; upper
// and work in the disk directory ddir), then its directory mounts. Under a user namespace the
// upper and work directories are owned by the range's root and every lower is idmapped into
// the range for the mount's duration (rootfs.MapLowers).
func (m *Manager) mountRoot(ctx context.Context, rec store.Sandbox, lower, ddir, merged string) error {
	upper, work := filepath.Join(ddir, "upper"), filepath.Join(ddir, "work")
	ns, err := userNSOf(rec)
	if err != nil {
		return err
	}
	if ns != nil {
		defer ns.Close()
		idm := idMapOf(rec)
		if err := m.traversableRoot(rec, idm); err != nil {
			return err
		}
		for _, d := range []string{upper, work} {
			if err := idm.Lchown(d, 0, 0); err != nil {
				return fmt.Errorf("sandbox dir: %w", err)
			}
		}
	}
	// A fresh upper takes the image root's mode (hutchd made it 0700): on every runtime, so
	// that users other than root can reach / (on gVisor and with userns off too).
	if err := rootMode(upper, lower); err != nil {
		return err
	}
	err = rootfs.MapLowers(m.sandboxDir(rec.ID), strings.Split(lower, ":"), ns, func(mapped []string) error {
		return m.rootfs.Mount(rootfs.JoinLower(mapped...), upper, work, merged)
	})
	if err != nil {
		return fmt.Errorf("mount root filesystem: %w", err)
	}
	return m.mountDirs(ctx, rec.ID, merged, ns)
}

// traversableRoot lets the sandbox's root (host ID idm.Root()) reach its root file system's
// mountpoint <data>/sandboxes/<id>/rootfs, which runc's init opens from inside the user
// namespace: the sandbox directory becomes root:<range root group> 0710 (only its own range
// may pass, and it can list nothing), and the directories above it that hutchd owns (the
// sandboxes directory, the data directory, the state directory) get search permission for
// others (0711 at least, as Docker's root under userns-remap). A directory above those without
// search permission for others is an error: hutchd does not change directories it does not own.
func (m *Manager) traversableRoot(rec store.Sandbox, idm idmap.Map) error {
	dir := m.sandboxDir(rec.ID)
	if err := os.Chown(dir, 0, idm.Root()); err != nil {
		return fmt.Errorf("sandbox dir: %w", err)
	}
	if err := os.Chmod(dir, 0o710); err != nil {
		return fmt.Errorf("sandbox dir: %w", err)
	}
	owned := map[string]bool{filepath.Clean(m.cfg.StateDir): true, filepath.Clean(m.cfg.DataDir): true}
	ownedBelow := func(p string) bool {
		for o := range owned {
			if p == o || strings.HasPrefix(p, o+"/") {
				return true
			}
		}
		return false
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("sandbox dir: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if !ownedBelow(p) {
				return errdefs.Newf(errdefs.CodeUnavailable, "user namespaces: %s must be searchable by others (chmod o+x) for sandboxes' roots below it", p)
			}
			if err := os.Chmod(p, fi.Mode().Perm()|0o011); err != nil {
				return fmt.Errorf("sandbox dir: %w", err)
			}
		}
		if p == "/" {
			return nil
		}
	}
}

// rootMode gives a fresh (empty) upper directory the permissions of the image's root (the
// last lower), which the overlay's root takes from the upper: "/" is then 0755 as in the
// image, so users other than root can reach their files. A used upper keeps its mode (the
// sandbox may have changed it).
func rootMode(upper, lower string) error {
	ents, err := os.ReadDir(upper)
	if err != nil || len(ents) > 0 {
		return err
	}
	lowers := strings.Split(lower, ":")
	fi, err := os.Stat(lowers[len(lowers)-1])
	if err != nil {
		return fmt.Errorf("image root: %w", err)
	}
	if err := os.Chmod(upper, fi.Mode().Perm()); err != nil {
		return fmt.Errorf("sandbox dir: %w", err)
	}
	return nil
}
