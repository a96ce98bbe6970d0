package daemontest

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// childSees reports whether a child started now has descriptor fd open.
func childSees(t *testing.T, fd int) bool {
	t.Helper()
	err := exec.Command("sh", "-c", fmt.Sprintf("test -e /proc/$$/fd/%d", fd)).Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return err == nil
}

// TestCloseInheritedOnExec: a descriptor opened without close-on-exec, as the lock of
// `flock LOCK go test` is inherited, reaches children until CloseInheritedOnExec (and its
// fallback for older kernels) marks it; then none gets it.
func TestCloseInheritedOnExec(t *testing.T) {
	for name, mark := range map[string]func() error{"close_range": CloseInheritedOnExec, "one at a time": markEachOnExec} {
		t.Run(name, func(t *testing.T) {
			fd, err := unix.Open(filepath.Join(t.TempDir(), "lock"), unix.O_CREAT|unix.O_RDWR, 0o600) // no O_CLOEXEC
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(fd) })
			if !childSees(t, fd) {
				t.Fatalf("a child does not get fd %d opened without close-on-exec; the test proves nothing", fd)
			}
			if err := mark(); err != nil {
				t.Fatal(err)
			}
			if childSees(t, fd) {
				t.Fatalf("a child still gets fd %d", fd)
			}
		})
	}
}
