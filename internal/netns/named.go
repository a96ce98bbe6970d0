package netns

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netns"

	"github.com/hutchdev/hutch/errdefs"
	"golang.org/x/sys/unix"
)

// nsfsMagic is statfs(2)'s f_type for a namespace file (NSFS_MAGIC).
const nsfsMagic = 0x6e736673

// ensureRunDir creates RunDir and makes it a shared mount point, as iproute2 does, so that
// unmounting a namespace there also unmounts the copies other mount namespaces (containers
// started later) received.
func ensureRunDir() error {
	if err := os.MkdirAll(RunDir, 0o755); err != nil {
		return fmt.Errorf("netns: create %s: %w", RunDir, err)
	}
	err := unix.Mount("", RunDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("netns: make %s shared: %w", RunDir, err)
	}
	// Not a mount point yet: bind it onto itself, then share it.
	if err := unix.Mount(RunDir, RunDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("netns: bind %s: %w", RunDir, err)
	}
	if err := unix.Mount("", RunDir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("netns: make %s shared: %w", RunDir, err)
	}
	return nil
}

// isNSMount reports whether path is a mounted namespace file.
func isNSMount(path string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("netns: statfs %s: %w", path, err)
	}
	return st.Type == nsfsMagic, nil
}

// createNamed creates a new network namespace and bind-mounts it at path. The work runs on a
// dedicated, locked OS thread; if that thread cannot be returned to its original namespace the
// goroutine exits still locked, so the Go runtime discards the thread.
func createNamed(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("netns: create mount point %s: %w", path, err)
	}
	f.Close()

	err = onThreadIn(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("netns: unshare: %w", err)
		}
		return nil
	}, func() error {
		if err := unix.Mount("/proc/thread-self/ns/net", path, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("netns: bind-mount namespace at %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// removeNamed unmounts and removes the namespace file at path; absent is not an error.
func removeNamed(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("netns: unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("netns: remove %s: %w", path, err)
	}
	return nil
}

// inNS runs fn on a locked OS thread switched into ns, then switches back. fn must not start
// goroutines that expect to run in ns.
func inNS(ns netns.NsHandle, fn func() error) error {
	return onThreadIn(func() error {
		if err := netns.Set(ns); err != nil {
			return fmt.Errorf("netns: enter namespace: %w", err)
		}
		return nil
	}, fn)
}

// threadSlots bounds how many goroutines are locked to a thread in another namespace at once.
// Each locked goroutine needs an OS thread of its own, and Go keeps idle threads for the life of
// the process, so a burst of dials into sandboxes (many preview requests at once) would otherwise
// leave hutchd with one thread per concurrent dial. The work done in a namespace is a few
// syscalls, so a small bound costs no throughput.
var threadSlots = make(chan struct{}, 4)

// onThreadIn runs fn on a locked OS thread after enter has moved that thread to another
// network namespace, then moves it back. If the thread cannot be restored it stays locked and
// dies with its goroutine, so no other goroutine ever runs in the wrong namespace. At most
// cap(threadSlots) run at once; fn must not call onThreadIn.
func onThreadIn(enter, fn func() error) error {
	threadSlots <- struct{}{}
	defer func() { <-threadSlots }()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: open current namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := enter(); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		fnErr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(fnErr, fmt.Errorf("netns: restore thread namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- fnErr
	}()
	return <-errc
}

// writeSysctl writes value to /proc/sys/<key> (key uses slashes). Missing keys (IPv6 compiled
// out) are reported as errNotExist-wrapped errors.
func writeSysctl(key, value string) error {
	p := "/proc/sys/" + key
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("netns: sysctl %s: %w", key, errNotExist)
		}
		return fmt.Errorf("netns: sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

// writeSysctlOptional is writeSysctl that ignores keys the kernel does not have.
func writeSysctlOptional(key, value string) error {
	if err := writeSysctl(key, value); err != nil && !errors.Is(err, errNotExist) {
		return err
	}
	return nil
}

// Do runs fn on an OS thread switched into the network namespace at path (a bind-mounted
// namespace file such as Net.NSPath); sockets fn creates belong to that namespace for their
// whole life. Like every namespace switch here, at most a few run at once, and fn must not call
// Do. Errors: a missing namespace → errdefs.ErrNotFound (wrapped); otherwise fn's error or
// the switch's.
func Do(path string, fn func() error) error {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("netns: open namespace %s: %w: %w", path, errdefs.ErrNotFound, err)
	}
	defer ns.Close()
	return inNS(ns, fn)
}
