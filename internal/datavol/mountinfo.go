package datavol

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hutchdev/hutch/internal/rootfs"
)

// mountEntry is one line of /proc/self/mountinfo (proc(5)).
type mountEntry struct {
	dev        string // "major:minor" of the mounted device
	root       string // the directory of the file system mounted here ("/" unless a bind mount)
	mountpoint string
	fstype     string
	source     string
}

// mounts returns every mount of this process's mount namespace, in file order (a mount comes
// after the one it covers).
func mounts() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("volume: %w", err)
	}
	defer f.Close()
	return parseMountinfo(f)
}

// parseMountinfo parses the mountinfo(5) lines of r.
func parseMountinfo(r io.Reader) ([]mountEntry, error) {
	var out []mountEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
		fields := strings.Fields(sc.Text())
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+2 >= len(fields) {
			continue
		}
		out = append(out, mountEntry{
			dev:        fields[2],
			root:       unescape(fields[3]),
			mountpoint: unescape(fields[4]),
			fstype:     fields[sep+1],
			source:     unescape(fields[sep+2]),
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("volume: read mountinfo: %w", err)
	}
	return out, nil
}

// mountAt returns the topmost mount at path (the one a lookup of path reaches), if any.
func mountAt(path string) (mountEntry, bool, error) {
	all, err := mounts()
	if err != nil {
		return mountEntry{}, false, err
	}
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].mountpoint == path {
			return all[i], true, nil
		}
	}
	return mountEntry{}, false, nil
}

// mountsOf returns the mountpoints where the device dev ("major:minor") is mounted.
func mountsOf(dev string) ([]string, error) {
	all, err := mounts()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range all {
		if m.dev == dev {
			out = append(out, m.mountpoint)
		}
	}
	return out, nil
}

// unescape decodes the \NNN octal escapes the kernel uses in mountinfo fields.
func unescape(s string) string { return rootfs.UnescapeMountinfo(s) }
