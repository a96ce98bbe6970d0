package datavol

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Off is the DataDirConfig.Image that turns the data volume off.
const Off = "off"

// Bounds of the "auto" data volume size.
const (
	autoSizeMin = 2 << 30
	autoSizeMax = 64 << 30
)

// DataDirConfig says where hutchd keeps the sandboxes' disks and the layer and tree caches.
type DataDirConfig struct {
	// StateDir is hutchd's state directory. The volume is mounted at <StateDir>/data; the
	// state dir itself is the data directory when the volume is off or when
	// <StateDir>/sandboxes holds disks from before the volume existed.
	StateDir string
	// Image is the volume's image file (Config.Image), or Off.
	Image string
	// Size is the volume's size (a ParseSize string), or "" or "auto": 20% of the free space
	// of Image's directory (2–64 GiB) when the image does not exist yet, and the image's size
	// as it is when it does.
	Size string
}

// OpenDataDir returns the data directory: the data volume's mountpoint <state>/data (mounted
// by Ensure, and created first if needed), or the state dir itself when the volume is off. A
// state dir whose sandboxes/ already holds sandbox disks from before the volume existed keeps
// using the state dir (with a warning), so those disks are not lost; the volume is used once
// they are gone.
func OpenDataDir(ctx context.Context, cfg DataDirConfig, log *slog.Logger) (string, error) {
	if cfg.Image == Off {
		log.Info("data volume off: sandbox disks in the state dir", "dir", cfg.StateDir)
		return cfg.StateDir, nil
	}
	if n := legacyDisks(cfg.StateDir); n > 0 {
		log.Warn("sandboxes from before the data volume exist: keeping sandbox disks in the state dir",
			"dir", filepath.Join(cfg.StateDir, "sandboxes"), "sandboxes", n)
		return cfg.StateDir, nil
	}
	size, err := requestSize(cfg.Size, cfg.Image)
	if err != nil {
		return "", err
	}
	v, err := Ensure(ctx, Config{Image: cfg.Image, Mountpoint: filepath.Join(cfg.StateDir, "data"), Size: size}, log)
	if err != nil {
		return "", fmt.Errorf("data volume: %w (run hutchd with --data-volume off to keep data in the state dir)", err)
	}
	if st, err := v.Stats(); err == nil {
		log.Info("data volume", "path", v.Path(), "image", v.Image(), "device", v.Device(),
			"size_bytes", st.SizeBytes, "free_bytes", st.FreeBytes, "inodes_free", st.InodesFree)
	}
	return v.Path(), nil
}

// legacyDisks counts the sandbox disks kept in the state dir itself (<state>/sandboxes/<id>
// holding an upper/ directory, as before the data volume). Other files there are not disks:
// each sandbox's egress audit log (<state>/sandboxes/<id>/egress.jsonl) lives in the state dir
// whatever the data directory is, and counting it would make a restarted hutchd leave its
// data volume and start every sandbox on an empty disk.
func legacyDisks(stateDir string) int {
	ents, err := os.ReadDir(filepath.Join(stateDir, "sandboxes"))
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if fi, err := os.Lstat(filepath.Join(stateDir, "sandboxes", e.Name(), "upper")); err == nil && fi.IsDir() {
			n++
		}
	}
	return n
}

// requestSize is the Config.Size to ask Ensure for: size parsed, or for "" and "auto"
// autoSize of the free space of image's directory when image does not exist yet, and 0 (keep
// it as it is) when it does.
func requestSize(size, image string) (int64, error) {
	if size != "" && size != "auto" {
		return ParseSize(size)
	}
	if _, err := os.Stat(image); err == nil {
		return 0, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(image), &st); err != nil {
		return 0, fmt.Errorf("data volume: free space of %s: %w", filepath.Dir(image), err)
	}
	return autoSize(int64(st.Bavail) * st.Bsize), nil
}

// autoSize is the "auto" size of a new volume on a file system with free bytes available:
// a fifth of them, within autoSizeMin…autoSizeMax.
func autoSize(free int64) int64 {
	return min(max(free/5, autoSizeMin), autoSizeMax)
}
