package image_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/image"
	"github.com/hutchdev/hutch/internal/image/imagetest"
	"github.com/hutchdev/hutch/internal/rootfs"
)

// TestDefaultImage builds (or reuses) the default image in the shared test cache and runs its
// tools in a chroot of an overlay, so the shared image stays untouched.
func TestDefaultImage(t *testing.T) {
	img := imagetest.Default(t)
	t.Logf("default image %s: %d MiB, built in %.0f s", img.ID, img.SizeBytes>>20, img.BuildSeconds)

	store := image.NewStore(imagetest.Dir(), nil)
	if got, err := store.Resolve("default"); err != nil || got.ID != img.ID {
		t.Fatalf("Resolve(default) = %s, %v", got.ID, err)
	}
	if img.Name != "default" || img.Suite != "bookworm" || !slices.Contains(img.Packages, "python3-pandas") || img.SizeBytes <= 0 || img.CreatedAt.IsZero() {
		t.Fatalf("metadata = %+v", img)
	}
	// Ensure of an existing image returns it without building.
	var progress bytes.Buffer
	again, err := store.Ensure(context.Background(), store.Default(), &progress)
	if err != nil || again.ID != img.ID || progress.Len() != 0 {
		t.Fatalf("Ensure existing = %s, %v, progress %q", again.ID, err, progress.String())
	}
	for _, name := range []string{"etc/hosts", "etc/resolv.conf"} {
		fi, err := os.Lstat(filepath.Join(img.RootFS, name))
		if err != nil || !fi.Mode().IsRegular() {
			t.Errorf("/%s: %v, mode %v; want a regular file", name, err, fi)
		}
	}
	if fi, err := os.Stat(filepath.Join(img.RootFS, "workspace")); err != nil || !fi.IsDir() {
		t.Errorf("/workspace: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(img.RootFS, "var/lib/apt/lists/*_Packages")); len(m) != 0 {
		t.Errorf("apt lists not cleaned: %v", m)
	}

	dir := t.TempDir()
	merged := filepath.Join(dir, "merged")
	if err := rootfs.Mount(img.RootFS, filepath.Join(dir, "upper"), filepath.Join(dir, "work"), merged); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rootfs.Unmount(merged); err != nil {
			t.Error(err)
		}
	})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"python3", "-c", "import numpy, pandas, matplotlib, IPython; print('ok', numpy.__version__)"}, "ok "},
		{[]string{"node", "--version"}, "v"},
		{[]string{"npm", "--version"}, "."},
		{[]string{"git", "--version"}, "git version"},
		{[]string{"curl", "--version"}, "curl"},
		{[]string{"file", "--version"}, "file-"},
		{[]string{"ps", "--version"}, "procps"},
		{[]string{"bash", "-c", "echo $BASH_VERSION"}, "5."},
		{[]string{"ls", "/etc/ssl/certs/ca-certificates.crt"}, "ca-certificates.crt"},
	} {
		out, err := chrootRun(t, merged, tc.args...)
		if err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("%v: %v\n%s", tc.args, err, out)
		}
	}
}

// chrootRun runs args in a chroot of root with /proc mounted in a private mount namespace.
func chrootRun(t *testing.T, root string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script := `mount -t proc proc "$0/proc" && exec chroot "$0" "$@"`
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script, root}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8", "MPLCONFIGDIR=/tmp"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
