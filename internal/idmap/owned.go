package idmap

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// The kernel charges inotify instances and watches, fanotify groups and marks, namespaces,
// POSIX message queue bytes, pending signals, locked shared memory and processes (ucounts) to
// the user who makes them in their own user namespace and again, level by level, to the owner
// of each ancestor namespace in that namespace's parent, against the parent's limits: a
// container's charges add up at its user namespace's owner in the initial namespace. A
// namespace made by root (runc) is owned by host root, so every such sandbox would share host
// root's per-user limits (fs.inotify.max_user_instances, RLIMIT_MSGQUEUE, RLIMIT_SIGPENDING,
// …) with the others and with the host. A namespace owned by the range's root instead is
// charged to host user Base, which nothing else uses: every sandbox gets the host's per-user
// limits for itself.

// ContainerUserNS returns an open file of a new user namespace whose uid_map and gid_map are
// m and whose owner is host user (and group) m.Base, the range's root: the namespace a
// container joins (runc: a user namespace with a path) so that its per-user kernel counters
// are its own. The namespace is made by a child cloned with CLONE_NEWUSER from a thread whose
// effective IDs are m.Base for the duration of the clone (the owner is the creator's effective
// ID; a process's Go-level setuid would change every thread, and unshare(CLONE_NEWUSER) is
// refused to a multithreaded process). The child never runs code of its own: it is started
// under PTRACE_TRACEME, so it stops at its execve of holder (any file host user m.Base may
// execute; it is never run), and is killed once its maps are written (by this process, root
// in the initial namespace) and its namespace is open. The namespace lives as long as the
// file or a process in it. The caller closes the file. Needs root.
func (m Map) ContainerUserNS(holder string) (*os.File, error) {
	if !m.Enabled() {
		return nil, fmt.Errorf("idmap: user namespace of an empty range")
	}
	if m.Base == 0 {
		return nil, fmt.Errorf("idmap: a container user namespace owned by host root")
	}
	type result struct {
		f   *os.File
		err error
	}
	done := make(chan result, 1)
	// A goroutine of its own, locked to its thread for good: the thread's IDs change, and
	// should restoring them fail, the thread ends with the goroutine instead of serving
	// others (the Go runtime starts no threads from a locked one, so none inherits them).
	go func() {
		runtime.LockOSThread()
		f, restored, err := m.containerUserNS(holder)
		if restored {
			runtime.UnlockOSThread()
		}
		done <- result{f, err}
	}()
	r := <-done
	return r.f, r.err
}

// containerUserNS is ContainerUserNS on a locked thread; restored reports whether the thread's
// IDs are root's again.
func (m Map) containerUserNS(holder string) (_ *os.File, restored bool, _ error) {
	const keep = ^uintptr(0) // setres*id: leave this ID unchanged
	// Group first, while still root; the real and saved IDs stay 0 so that the thread can
	// switch back (and regains its capabilities when its effective UID is 0 again).
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, keep, uintptr(m.Base), keep); e != 0 {
		return nil, true, fmt.Errorf("idmap: setresgid: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, keep, uintptr(m.Base), keep); e != 0 {
		_, _, e2 := unix.RawSyscall(unix.SYS_SETRESGID, keep, 0, keep)
		return nil, e2 == 0, fmt.Errorf("idmap: setresuid: %w", e)
	}
	proc, startErr := os.StartProcess(holder, []string{"hutch-userns"}, &os.ProcAttr{
		Sys: &syscall.SysProcAttr{
			Cloneflags: unix.CLONE_NEWUSER,
			Ptrace:     true,
			Pdeathsig:  syscall.SIGKILL,
		},
	})
	_, _, e1 := unix.RawSyscall(unix.SYS_SETRESUID, keep, 0, keep)
	_, _, e2 := unix.RawSyscall(unix.SYS_SETRESGID, keep, 0, keep)
	restored = e1 == 0 && e2 == 0
	if startErr != nil {
		if errors.Is(startErr, os.ErrPermission) {
			return nil, restored, fmt.Errorf("idmap: %s must be executable by host user %d (it holds the sandbox's user namespace while it is set up, never running): %w", holder, m.Base, startErr)
		}
		return nil, restored, fmt.Errorf("idmap: spawn user namespace holder: %w", startErr)
	}
	defer func() {
		_ = proc.Kill()
		_, _ = proc.Wait()
	}()
	if !restored {
		return nil, false, fmt.Errorf("idmap: restore the thread's IDs: %v %v", e1, e2)
	}
	mapping := []byte("0 " + strconv.FormatUint(uint64(m.Base), 10) + " " + strconv.FormatUint(uint64(m.Size), 10) + "\n")
	for _, f := range []string{"uid_map", "gid_map"} {
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/%s", proc.Pid, f), mapping, 0); err != nil {
			return nil, true, fmt.Errorf("idmap: write %s: %w", f, err)
		}
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", proc.Pid))
	if err != nil {
		return nil, true, fmt.Errorf("idmap: open user namespace: %w", err)
	}
	return f, true, nil
}

// Owner returns the host UID owning the user namespace open as ns (ioctl NS_GET_OWNER_UID).
func Owner(ns *os.File) (int, error) {
	uid, err := unix.IoctlGetUint32(int(ns.Fd()), unix.NS_GET_OWNER_UID)
	if err != nil {
		return 0, fmt.Errorf("idmap: owner of user namespace: %w", err)
	}
	return int(uid), nil
}
