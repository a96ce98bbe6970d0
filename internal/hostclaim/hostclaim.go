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
// Prefix marks a name that owns every host name starting with it (netns and veth prefixes):
// it conflicts with a held claim of the same kind when either value is a prefix of the other.
type Name struct {
	Kind, Value, Flag string
	Prefix            bool
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
		if n.Prefix {
			if err := checkOverlap(dir, n); err != nil {
				c.Release()
				return nil, err
			}
		}
	}
	return c, nil
}

// checkOverlap fails when another process holds a claim of n's kind whose value is a prefix
// of n's or has n's as a prefix ("hutch" and "hutch-"): each daemon would sweep the other's
// names. A claim file whose holder is gone is skipped. Two daemons starting at once with
// overlapping prefixes may both fail; neither starts wrongly.
func checkOverlap(dir string, n Name) error {
	kind := kindPrefix(n.Kind)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("host claims: %w", err)
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), kind) || e.Name() == fileName(n) {
			continue
		}
		pid, value := readClaim(filepath.Join(dir, e.Name()))
		if value == "" || !(strings.HasPrefix(value, n.Value) || strings.HasPrefix(n.Value, value)) {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // released and removed meanwhile
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		f.Close() // drops the shared lock if it was taken
		if errors.Is(err, unix.EWOULDBLOCK) {
			return errdefs.Newf(errdefs.CodeUnavailable,
				"%s %q overlaps %q of another hutchd (%s): each would remove the other's names as leftovers; give this one a %s that neither starts nor is the start of another's",
				n.Kind, n.Value, value, holderName(pid), n.Flag)
		}
	}
	return nil
}

// readClaim returns the PID and value a claim file holds ("PID\nVALUE\n"); 0 and "" when
// unreadable.
func readClaim(path string) (int, string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, ""
	}
	pidLine, value, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(pidLine))
	return pid, strings.TrimSuffix(value, "\n")
}

func holderName(pid int) string {
	if pid > 0 {
		return "process " + strconv.Itoa(pid)
	}
	return "another process"
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
		pid, _ := readClaim(path)
		f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("host claims: lock %s: %w", path, err)
		}
		return nil, errdefs.Newf(errdefs.CodeUnavailable,
			"%s %q is in use by another hutchd (%s): give this one its own %s (two daemons on one host must not share a state directory, cgroup parent, netns or veth prefix, or nftables table)",
			n.Kind, n.Value, holderName(pid), n.Flag)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"+n.Value+"\n"), 0)
	}
	return f, nil
}

// fileName is n's claim file: the kind, and the value itself when it is a plain name, else its
// hash (a state directory's path).
func fileName(n Name) string {
	v := n.Value
	if v == "" || strings.ContainsAny(v, "/.\x00") || len(v) > 64 {
		sum := sha256.Sum256([]byte(v))
		v = hex.EncodeToString(sum[:12])
	}
	return kindPrefix(n.Kind) + v
}

// kindPrefix is how the claim files of a kind begin: "cgroup-parent.".
func kindPrefix(kind string) string { return strings.ReplaceAll(kind, " ", "-") + "." }

// Release gives up every claim. It is safe to call more than once.
func (c *Claims) Release() {
	for _, f := range c.files {
		f.Close()
	}
	c.files = nil
}
