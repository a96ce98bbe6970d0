package rootfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/idmap"
)

// MapLowers calls fn with lowers shown through idmapped mounts of userns (idmap.Map.UserNS):
// each lower is attached read-only, shifted into the sandbox's ID range, at stage/idmap-*/<i>,
// and fn gets those paths in the same order. Once fn returns the attachments are detached and
// the directory removed: an overlay mounted by fn keeps its own private copies of its layers
// (with their idmapping), so nothing stays mounted for it. With a nil userns fn gets lowers
// unchanged. stage must be an existing directory on the host (the sandbox's directory; a crash
// part way leaves mounts below it that recovery removes as strays).
func MapLowers(stage string, lowers []string, userns *os.File, fn func(mapped []string) error) error {
	if userns == nil {
		return fn(lowers)
	}
	dir, err := os.MkdirTemp(stage, "idmap-")
	if err != nil {
		return fmt.Errorf("rootfs: %w", err)
	}
	var attached []string
	defer func() {
		for _, p := range attached {
			_ = unix.Unmount(p, unix.MNT_DETACH)
		}
		_ = os.RemoveAll(dir)
	}()
	mapped := make([]string, len(lowers))
	for i, l := range lowers {
		p := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(p, 0o700); err != nil {
			return fmt.Errorf("rootfs: %w", err)
		}
		if err := idmap.MountIDMapped(l, p, userns, true); err != nil {
			return fmt.Errorf("rootfs: lower %s: %w", l, err)
		}
		attached = append(attached, p)
		mapped[i] = p
	}
	return fn(mapped)
}

// IsIDMapStage reports whether rel (a path below a sandbox directory) is or lies below a
// staging directory of MapLowers: a mount there outlived a crashed hutchd and is a stray.
func IsIDMapStage(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	return strings.HasPrefix(first, "idmap-")
}
