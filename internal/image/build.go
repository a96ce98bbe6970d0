package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
)

// Ensure returns the image of recipe r, building it first if the store does not have it. The
// output of the build tools (debootstrap, apt-get), prefixed by one "==> step" line per step,
// is streamed to progress (nil discards it); nothing is written when the image already exists.
// Concurrent callers for the same recipe, in this or other processes, build it once: the others
// wait for the build and return its result. Cancelling ctx stops the build (and the wait for
// another builder) and leaves no trace but a stale temp dir the next build removes.
//
// Building needs root, debootstrap and chroot, and network access to the recipe's mirror. A
// failed build gives an *errdefs.Error with code IMAGE_BUILD_FAILED whose message ends with the
// last lines of tool output.
func (s *Store) Ensure(ctx context.Context, r Recipe, progress io.Writer) (Image, error) {
	id := r.ID()
	if img, err := s.Get(id); !errors.Is(err, errdefs.ErrNotFound) {
		return img, err
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return Image{}, fmt.Errorf("image: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(s.dir, ".lock-"+id))
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	// Another process may have finished the build while we waited for the lock.
	if img, err := s.Get(id); !errors.Is(err, errdefs.ErrNotFound) {
		return img, err
	}
	return s.build(ctx, r, progress)
}

// lockFile takes an exclusive flock on path, polling so that ctx can cancel the wait.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("image: lock: %w", err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); _ = f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("image: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("image: waiting for another build: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// build runs with the image's lock held and the image absent.
func (s *Store) build(ctx context.Context, r Recipe, progress io.Writer) (Image, error) {
	id := r.ID()
	start := time.Now()
	if progress == nil {
		progress = io.Discard
	}
	out := &tailWriter{w: progress, max: 30}

	// Builds that died (crash, cancel) leave temp dirs; nothing is mounted in them because every
	// build step runs in its own mount namespace.
	stale, _ := filepath.Glob(filepath.Join(s.dir, ".tmp-"+id+"-*"))
	for _, d := range stale {
		if err := os.RemoveAll(d); err != nil {
			return Image{}, fmt.Errorf("image: remove stale build %s: %w", d, err)
		}
	}
	tmp, err := os.MkdirTemp(s.dir, ".tmp-"+id+"-")
	if err != nil {
		return Image{}, fmt.Errorf("image: %w", err)
	}
	keep := false
	defer func() {
		if !keep {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return Image{}, fmt.Errorf("image: %w", err)
	}
	root := filepath.Join(tmp, "rootfs")
	s.log.Info("building image", "image_id", id, "name", r.Name, "suite", r.Suite, "packages", len(r.Packages))

	fail := func(step string, err error) (Image, error) {
		s.log.Error("image build failed", "image_id", id, "step", step, "err", err)
		msg := fmt.Sprintf("build image %s: %s: %v", id, step, err)
		if t := out.tail(); t != "" {
			msg += "\n" + t
		}
		return Image{}, &errdefs.Error{Code: errdefs.CodeImageBuildFailed, Message: msg, Err: err}
	}

	step := func(name string) {
		fmt.Fprintf(out, "==> %s\n", name)
		s.log.Info("image build step", "image_id", id, "step", name, "elapsed", time.Since(start).Round(time.Millisecond))
	}

	mirror, err := r.mirror()
	if err != nil {
		return fail("debootstrap", err)
	}
	step("debootstrap " + r.Suite + " from " + mirror)
	if err := run(ctx, out, nil, "debootstrap", "--variant=minbase", r.Suite, root, mirror); err != nil {
		return fail("debootstrap", err)
	}
	if err := prepareChroot(root); err != nil {
		return fail("prepare chroot", err)
	}
	if pkgs := r.normalizedPackages(); len(pkgs) > 0 {
		step("apt-get update")
		if err := chroot(ctx, out, root, "apt-get", "update"); err != nil {
			return fail("apt-get update", err)
		}
		step("apt-get install " + strings.Join(pkgs, " "))
		args := append([]string{"apt-get", "install", "-y", "--no-install-recommends"}, pkgs...)
		if err := chroot(ctx, out, root, args...); err != nil {
			return fail("apt-get install", err)
		}
	}
	step("clean up")
	if err := chroot(ctx, out, root, "apt-get", "clean"); err != nil {
		return fail("apt-get clean", err)
	}
	if err := finishChroot(root); err != nil {
		return fail("finish", err)
	}
	size, err := treeSize(root)
	if err != nil {
		return fail("measure", err)
	}
	img := Image{
		ID:           id,
		Name:         r.Name,
		Suite:        r.Suite,
		Packages:     r.normalizedPackages(),
		CreatedAt:    time.Now().UTC().Truncate(time.Second),
		SizeBytes:    size,
		BuildSeconds: time.Since(start).Round(time.Millisecond).Seconds(),
	}
	b, err := json.MarshalIndent(img, "", "  ")
	if err != nil {
		return fail("metadata", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "image.json"), append(b, '\n'), 0o644); err != nil {
		return fail("metadata", err)
	}
	final := filepath.Join(s.dir, id)
	if err := os.Rename(tmp, final); err != nil {
		return fail("publish", err)
	}
	keep = true
	img.RootFS = filepath.Join(final, "rootfs")
	fmt.Fprintf(out, "==> image %s built in %s, %d MiB\n", id, time.Since(start).Round(time.Second), size>>20)
	s.log.Info("image built", "image_id", id, "seconds", img.BuildSeconds, "size_bytes", size)
	return img, nil
}

// buildEnv is the environment of every build tool: nothing inherited from the caller.
var buildEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
	"LANG=C.UTF-8",
	"DEBIAN_FRONTEND=noninteractive",
	"DEBCONF_NONINTERACTIVE_SEEN=true",
}

// run runs a tool in a private mount namespace (so mounts it makes, like debootstrap's /proc,
// vanish with it even if it is killed), in its own process group (killed whole on cancel),
// with stdout and stderr to out.
func run(ctx context.Context, out io.Writer, extraEnv []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(append([]string{}, buildEnv...), extraEnv...)
	cmd.Stdin = nil
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Unshareflags: syscall.CLONE_NEWNS}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", name, ctx.Err())
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// chroot runs args inside root with /proc mounted; the mount lives in the command's private
// mount namespace only.
func chroot(ctx context.Context, out io.Writer, root string, args ...string) error {
	script := `mount -t proc proc "$0/proc" && exec chroot "$0" "$@"`
	return run(ctx, out, nil, "/bin/sh", append([]string{"-c", script, root}, args...)...)
}

// policyRC forbids maintainer scripts to start services, in the build and in sandboxes (which
// have no init system to run them).
const policyRC = "#!/bin/sh\nexit 101\n"

// dpkgExcludes keeps documentation and translations out of the image, as Debian's slim
// container images do. Copyright files stay.
const dpkgExcludes = `path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
`

const hostsFile = `127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
`

// prepareChroot makes a fresh debootstrap root ready for apt-get: no service starts, no docs,
// fast unpacking, and the host's name resolution.
func prepareChroot(root string) error {
	if _, err := os.Stat(filepath.Join(root, "dev/null")); err != nil {
		return fmt.Errorf("debootstrap left no /dev/null: %w", err)
	}
	files := map[string]struct {
		data string
		mode os.FileMode
	}{
		"usr/sbin/policy-rc.d":                  {policyRC, 0o755},
		"etc/dpkg/dpkg.cfg.d/hutch-excludes":    {dpkgExcludes, 0o644},
		"etc/dpkg/dpkg.cfg.d/hutch-build-speed": {"force-unsafe-io\n", 0o644},
	}
	for name, f := range files {
		if err := writeFile(filepath.Join(root, name), []byte(f.data), f.mode); err != nil {
			return err
		}
	}
	for _, name := range []string{"etc/resolv.conf", "etc/hosts"} {
		b, err := os.ReadFile("/" + name)
		if err != nil {
			return fmt.Errorf("copy host %s: %w", name, err)
		}
		if err := writeFile(filepath.Join(root, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// finishChroot removes build-only files and caches, and leaves the files hutchd expects:
// /workspace, and /etc/hosts and /etc/resolv.conf as regular files (they are bind-mounted over).
func finishChroot(root string) error {
	if err := os.Remove(filepath.Join(root, "etc/dpkg/dpkg.cfg.d/hutch-build-speed")); err != nil {
		return fmt.Errorf("remove build config: %w", err)
	}
	for _, pattern := range []string{
		"var/lib/apt/lists/*",
		"var/cache/apt/*.bin",
		"var/cache/apt/archives/*.deb",
		"var/cache/debconf/*-old",
		"var/lib/dpkg/*-old",
		"var/log/apt/*",
		"var/log/*.log",
		"var/log/bootstrap.log",
		"root/.cache",
		"root/.npm",
		"tmp/*",
		"var/tmp/*",
	} {
		matches, _ := filepath.Glob(filepath.Join(root, pattern))
		for _, m := range matches {
			if filepath.Base(m) == "partial" || filepath.Base(m) == "lock" || filepath.Base(m) == "auxfiles" {
				continue
			}
			if err := os.RemoveAll(m); err != nil {
				return fmt.Errorf("clean %s: %w", m, err)
			}
		}
	}
	if err := writeFile(filepath.Join(root, "etc/hosts"), []byte(hostsFile), 0o644); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(root, "etc/resolv.conf"), nil, 0o644); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(root, "etc/hostname"), []byte("hutch\n"), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, "workspace"), 0o755); err != nil {
		return fmt.Errorf("create /workspace: %w", err)
	}
	return nil
}

// writeFile replaces name (even a symlink) with a regular file.
func writeFile(name string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.WriteFile(name, data, mode); err != nil {
		return err
	}
	return os.Chmod(name, mode)
}

// treeSize is the apparent size of the files under root, hard links counted once.
func treeSize(root string) (int64, error) {
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var total int64
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 && !d.IsDir() {
			k := inode{uint64(st.Dev), st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		total += info.Size()
		return nil
	})
	return total, err
}
