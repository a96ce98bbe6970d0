// Package idmap gives a sandbox's user namespace its ID range on the host side: the mapping
// (in-sandbox ID n = host ID Base+n), a user namespace file descriptor carrying it, idmapped
// mounts (a directory shown with its owners shifted into the range, used for the image and
// snapshot layers below a sandbox's overlay) and owner shifting for the files hutchd itself
// writes into or reads from a sandbox's disk.
//
// Files on a sandbox's own disk (its overlay upper directory) are stored with host IDs (Base+n),
// so the host never sees a file of the sandbox owned by a host user (a setuid file made inside
// is setuid to an unprivileged host ID). Shared trees (image, snapshot layers, backup trees)
// are stored with in-sandbox IDs (0-based) and shown shifted through idmapped mounts, so one
// copy serves every sandbox whatever its range.
package idmap

import (
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Overflow is the ID a host ID outside a range is given inside it (the kernel's overflowuid,
// "nobody").
const Overflow = 65534

// Map is a sandbox's ID range: in-sandbox IDs [0, Size) are host IDs [Base, Base+Size), for
// users and groups alike. The zero Map means no user namespace (IDs are not shifted).
type Map struct {
	Base uint32
	Size uint32
}

// Enabled reports whether m shifts IDs (a user namespace is in use).
func (m Map) Enabled() bool { return m.Size != 0 }

// ToHost returns the host ID of in-sandbox ID id. IDs outside [0, Size) have no host ID in the
// range and come back as ok=false. The zero Map returns id unchanged.
func (m Map) ToHost(id int) (int, bool) {
	if !m.Enabled() {
		return id, true
	}
	if id < 0 || id >= int(m.Size) {
		return 0, false
	}
	return int(m.Base) + id, true
}

// ToSandbox returns the in-sandbox ID of host ID id, or Overflow with ok=false when id is
// outside the range. The zero Map returns id unchanged.
func (m Map) ToSandbox(id int) (int, bool) {
	if !m.Enabled() {
		return id, true
	}
	if id < int(m.Base) || id-int(m.Base) >= int(m.Size) {
		return Overflow, false
	}
	return id - int(m.Base), true
}

// SandboxOwner returns the owner mapping of an archive of the sandbox's files read from the
// host (archive.Options.Owner, archive.LayerOptions.Owner): host IDs of the range become
// in-sandbox IDs, others Overflow. The zero Map returns nil: owners are recorded as they are.
func (m Map) SandboxOwner() func(uid, gid int) (int, int) {
	if !m.Enabled() {
		return nil
	}
	return func(uid, gid int) (int, int) {
		u, _ := m.ToSandbox(uid)
		g, _ := m.ToSandbox(gid)
		return u, g
	}
}

// Root returns the host UID (= GID) of the sandbox's root: Base, or 0 for the zero Map.
func (m Map) Root() int {
	if !m.Enabled() {
		return 0
	}
	return int(m.Base)
}

func (m Map) sysMappings() []syscall.SysProcIDMap {
	return []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(m.Base), Size: int(m.Size)}}
}

// UserNS returns an open file of a new user namespace whose uid_map and gid_map are m (the
// argument of mount_setattr(MOUNT_ATTR_IDMAP)). It spawns a child in a new user namespace that
// never runs any code of its own: the child is started under PTRACE_TRACEME, so it stops at its
// execve, and is killed once its namespace is open (runc's and containerd's technique). The
// caller closes the file. Needs CAP_SETUID/CAP_SETGID in the initial user namespace (root).
func (m Map) UserNS() (*os.File, error) {
	if !m.Enabled() {
		return nil, fmt.Errorf("idmap: user namespace of an empty range")
	}
	// A ptraced child's tracer is the thread that started it; keep that thread until the
	// child has been reaped.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	proc, err := os.StartProcess("/proc/self/exe", []string{"hutch-idmap"}, &os.ProcAttr{
		Sys: &syscall.SysProcAttr{
			Cloneflags:                 unix.CLONE_NEWUSER,
			UidMappings:                m.sysMappings(),
			GidMappings:                m.sysMappings(),
			GidMappingsEnableSetgroups: false,
			Ptrace:                     true,
			Pdeathsig:                  syscall.SIGKILL,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("idmap: spawn user namespace holder: %w", err)
	}
	defer func() {
		_ = proc.Kill()
		_, _ = proc.Wait()
	}()
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", proc.Pid))
	if err != nil {
		return nil, fmt.Errorf("idmap: open user namespace: %w", err)
	}
	return f, nil
}

// MountIDMapped attaches an idmapped copy of the directory src at dst (an existing
// directory): files src's file system stores with ID n appear at dst owned by the host ID
// that userns maps n to (mount_setattr MOUNT_ATTR_IDMAP; src's file system must support
// idmapped mounts: ext4, xfs, btrfs, tmpfs and overlayfs do). Submounts of src are not copied.
// The copy is read-only when readOnly is set. Undo with unix.Unmount(dst, MNT_DETACH).
func MountIDMapped(src, dst string, userns *os.File, readOnly bool) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("idmap: open_tree %s: %w", src, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns.Fd())}
	if readOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("idmap: idmap %s: %w", src, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("idmap: attach %s at %s: %w", src, dst, err)
	}
	return nil
}

// Lchown sets the owner of path (not following a symlink) to the host IDs of in-sandbox IDs
// uid and gid. An ID outside the range is an error.
func (m Map) Lchown(path string, uid, gid int) error {
	hu, ok1 := m.ToHost(uid)
	hg, ok2 := m.ToHost(gid)
	if !ok1 || !ok2 {
		return fmt.Errorf("idmap: chown %s: owner %d:%d outside the range of %d IDs", path, uid, gid, m.Size)
	}
	if err := os.Lchown(path, hu, hg); err != nil {
		return fmt.Errorf("idmap: %w", err)
	}
	return nil
}
