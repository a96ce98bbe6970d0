package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/config"
	"github.com/hutchdev/hutch/internal/datavol"
)

// Bounds of the "auto" data volume size.
const (
	autoVolumeMin = 2 << 30
	autoVolumeMax = 64 << 30
)

// openDataDir returns the directory that holds the sandboxes' disks and the layer and tree
// caches: the data volume's mountpoint <state>/data (mounted, and created first if needed), or
// the state dir itself when the volume is off. A state dir whose sandboxes/ already holds
// sandboxes from before the volume existed keeps using the state dir (with a warning), so
// those disks are not lost; the volume is used once they are gone.
func openDataDir(ctx context.Context, cfg config.Config, log *slog.Logger) (string, error) {
	if cfg.DataVolume == "off" {
		log.Info("data volume off: sandbox disks in the state dir", "dir", cfg.StateDir)
		return cfg.StateDir, nil
	}
	if n := legacyDisks(cfg.StateDir); n > 0 {
		log.Warn("sandboxes from before the data volume exist: keeping sandbox disks in the state dir",
			"dir", filepath.Join(cfg.StateDir, "sandboxes"), "sandboxes", n)
		return cfg.StateDir, nil
	}
	size, err := volumeSize(cfg)
	if err != nil {
		return "", err
	}
	v, err := datavol.Ensure(ctx, datavol.Config{Image: cfg.DataVolume, Mountpoint: filepath.Join(cfg.StateDir, "data"), Size: size}, log)
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
// whatever the data directory is, and counting it made a restarted hutchd leave its data
// volume and start every sandbox on an empty disk.
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

// volumeSize is the size to ask for: the configured one, or for "auto" 20% of the state dir's
// free space (within autoVolumeMin…autoVolumeMax) when the image does not exist yet, and 0
// (keep it as it is) when it does.
func volumeSize(cfg config.Config) (int64, error) {
	if cfg.DataVolumeSize != "" && cfg.DataVolumeSize != "auto" {
		return datavol.ParseSize(cfg.DataVolumeSize)
	}
	if _, err := os.Stat(cfg.DataVolume); err == nil {
		return 0, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(cfg.DataVolume), &st); err != nil {
		return 0, fmt.Errorf("data volume: free space of %s: %w", filepath.Dir(cfg.DataVolume), err)
	}
	return min(max(int64(st.Bavail)*st.Bsize/5, autoVolumeMin), autoVolumeMax), nil
}
