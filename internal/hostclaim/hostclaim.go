// Package hostclaim claims, for the life of a hutchd process, the host names it owns: its state
// directory, cgroup parent, network namespace prefix, veth prefix and nftables table. hutchd
// removes at start whatever it finds under those names that no sandbox of its owns (Recover),
// so a second daemon configured with one of them would take the first one's sandboxes for
// leftovers and kill them. With the claims it refuses to start instead.
//
// A claim is an exclusive flock(2) on a file in a directory under /run (a tmpfs, emptied at
// boot). The kernel drops a flock when its holder dies, so a crashed or SIGKILLed hutchd leaves
// no stale claim and its successor starts at once. The file holds the holder's PID, for the
// error message.
package hostclaim

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
)

// DefaultDir is where hutchd keeps its claim files.
const DefaultDir = "/run/hutch/claims"

// Name is one host name a daemon owns: Kind names the resource ("cgroup parent"), Value is
// the name ("hutch"), and Flag is the option that sets it ("--cgroup-parent"), for the error.
type Name struct {
	Kind, Value, Flag string
}

// Claims are the names a process holds; Release gives them up (exit does too).
type Claims struct {
	files []*os.File
}

// Take claims every name in names in dir (created 0700 if missing), or none: a name another
// process holds gives an error of class errdefs.ErrUnavailable that names the resource, the
// holder's PID and the flag to change. A name can be claimed only once per process as well.
func Take(dir string, names []Name) (*Claims, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("host claims: %w", err)
	}
	c := &Claims{}
	for _, n := range names {
		f, err := take(dir, n)
		if err != nil {
			c.Release()
			return nil, err
		}
		c.files = append(c.files, f)
	}
	return c, nil
}

func take(dir string, n Name) (*os.File, error) {
	path := filepath.Join(dir, fileName(n))
	// O_CLOEXEC (os.OpenFile's default): a child that outlives hutchd (runc, a shim) must not
	// keep the claim.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("host claims: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("host claims: lock %s: %w", path, err)
		}
		holder := "another process"
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			holder = "process " + strconv.Itoa(pid)
		}
		return nil, errdefs.Newf(errdefs.CodeUnavailable,
			"%s %q is in use by another hutchd (%s): give this one its own %s (two daemons on one host must not share a state directory, cgroup parent, netns or veth prefix, or nftables table)",
			n.Kind, n.Value, holder, n.Flag)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// fileName is n's claim file: the kind, and the value itself when it is a plain name, else its
// hash (a state directory's path).
func fileName(n Name) string {
	kind := strings.ReplaceAll(n.Kind, " ", "-")
	v := n.Value
	if v == "" || strings.ContainsAny(v, "/.\x00") || len(v) > 64 {
		sum := sha256.Sum256([]byte(v))
		v = hex.EncodeToString(sum[:12])
	}
	return kind + "." + v
}

// Release gives up every claim. It is safe to call more than once.
func (c *Claims) Release() {
	for _, f := range c.files {
		f.Close()
	}
	c.files = nil
}
