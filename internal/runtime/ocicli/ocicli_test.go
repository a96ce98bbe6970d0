package ocicli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
)

// fakeBinary is a runc-compatible binary for the driver's logic: it appends its arguments to
// $OCICLI_TEST_LOG and answers state, list and delete as runc does.
const fakeBinary = `#!/bin/sh
echo "$@" >> "$OCICLI_TEST_LOG"
case " $* " in
*" state a. "*) echo '{"id":"a.","pid":0,"status":"stopped","bundle":"/x"}' ;;
*" state "*) echo 'container does not exist' >&2; exit 1 ;;
*" list "*) echo '[{"id":"a.","pid":5,"status":"running"},{"id":"b.","pid":9,"status":"stopped"}]' ;;
*" delete "*"a. "*) ;;
*" delete "*) echo 'container does not exist' >&2; exit 1 ;;
*" kill "*"b. "*) echo 'container is not running' >&2; exit 1 ;;
esac
`

func newFake(t *testing.T) (*Driver, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "fakeoci")
	if err := os.WriteFile(bin, []byte(fakeBinary), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "args")
	t.Setenv("OCICLI_TEST_LOG", log)
	d, err := New(Config{
		Name: "fakeoci", Binary: bin, Root: filepath.Join(dir, "root"), BundleDir: filepath.Join(dir, "bundles"),
		CgroupParent: "hutch-ocicli-test", IDSuffix: ".",
		GlobalFlags: func(path string) ([]string, error) { return []string{"--flag", filepath.Base(path)}, nil },
		Classes: []Class{
			{Err: errdefs.ErrNotFound, Text: []string{"does not exist"}},
			{Err: errdefs.ErrFailedPrecondition, Text: []string{"not running"}},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d, log
}

// TestDriver: every command carries --root and the global flags, and each container ID its
// suffix; listed IDs lose it; a stopped container has no PID; the binary's messages are
// classified; Delete of an unknown container removes its bundle and is no error.
func TestDriver(t *testing.T) {
	d, log := newFake(t)
	ctx := context.Background()
	list, err := d.List(ctx)
	want := []runtime.State{{ID: "a", Status: runtime.StatusRunning, Pid: 5}, {ID: "b", Status: runtime.StatusStopped}}
	if err != nil || len(list) != 2 || list[0] != want[0] || list[1] != want[1] {
		t.Errorf("List = %+v, %v; want %+v", list, err, want)
	}
	if st, err := d.State(ctx, "a"); err != nil || st != (runtime.State{ID: "a", Status: runtime.StatusStopped}) {
		t.Errorf("State(a) = %+v, %v", st, err)
	}
	if _, err := d.State(ctx, "c"); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "fakeoci state c: container does not exist") {
		t.Errorf("State(c) = %v, want ErrNotFound with the binary's message", err)
	}
	if _, err := d.State(ctx, "../c"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("State(../c) = %v, want ErrInvalidArgument", err)
	}
	if err := d.Kill(ctx, "a", syscall.SIGKILL, true); err != nil {
		t.Errorf("Kill(a) = %v", err)
	}
	if err := d.Kill(ctx, "b", syscall.SIGTERM, false); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Kill(b) = %v, want ErrFailedPrecondition", err)
	}
	if err := os.MkdirAll(d.Bundle("c"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(ctx, "c", true); err != nil {
		t.Errorf("Delete(c) = %v", err)
	}
	if _, err := os.Stat(d.Bundle("c")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bundle of c remains: %v", err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	g := "--root " + d.Root() + " --flag fakeoci "
	wantArgs := []string{
		g + "list --format json",
		g + "state a.",
		g + "state c.",
		g + "kill --all a. 9",
		g + "kill b. 15",
		g + "delete --force c.",
	}
	if got := strings.Split(strings.TrimSpace(string(b)), "\n"); strings.Join(got, "\n") != strings.Join(wantArgs, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantArgs, "\n"))
	}
}

// TestNew: missing fields and a bad cgroup parent are invalid arguments, a missing binary is
// unavailable.
func TestNew(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  Config
		want error
	}{
		{"no root", Config{Name: "sh", BundleDir: dir}, errdefs.ErrInvalidArgument},
		{"no binary", Config{Name: "no-such-oci-binary", Root: dir, BundleDir: dir}, errdefs.ErrUnavailable},
		{"bad parent", Config{Name: "sh", Root: dir, BundleDir: dir, CgroupParent: "../x"}, errdefs.ErrInvalidArgument},
	} {
		if _, err := New(tc.cfg, nil); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestError: the first class whose text the message holds wins, case-insensitively; no class
// is ErrInternal; the cause stays in the chain; an empty stderr gives the cause's text.
func TestError(t *testing.T) {
	c := Config{Name: "x", Classes: []Class{
		{Err: errdefs.ErrNotFound, Text: []string{"does not exist"}},
		{Err: errdefs.ErrFailedPrecondition, Text: []string{"not running", "does not"}},
	}}
	cause := errors.New("exit status 1")
	for _, tc := range []struct {
		stderr string
		want   error
		text   string
	}{
		{"noise\ncontainer Does Not Exist\n", errdefs.ErrNotFound, "x op id: container Does Not Exist: "},
		{"container is not running", errdefs.ErrFailedPrecondition, "x op id: container is not running: "},
		{"odd", errdefs.ErrInternal, "x op id: odd: "},
		{"", errdefs.ErrInternal, "x op id: exit status 1: "},
	} {
		err := c.Error("op", "id", cause, tc.stderr)
		if !errors.Is(err, tc.want) || !errors.Is(err, cause) || !strings.HasPrefix(err.Error(), tc.text) {
			t.Errorf("%q: %v, want class %v and prefix %q", tc.stderr, err, tc.want, tc.text)
		}
	}
}

// TestExitCode: a normal exit gives its status, a signal 128+N, anything else -1.
func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 3", 3},
		{"kill -9 $$", 137},
	} {
		err := exec.Command("sh", "-c", tc.script).Run()
		if got := ExitCode(err); got != tc.want {
			t.Errorf("%s: ExitCode = %d, want %d", tc.script, got, tc.want)
		}
	}
	if got := ExitCode(errors.New("not started")); got != -1 {
		t.Errorf("ExitCode(other) = %d, want -1", got)
	}
}
