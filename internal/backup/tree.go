package backup

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/archive"
	"github.com/hutchdev/hutch/internal/blob"
	"github.com/hutchdev/hutch/internal/treecache"
)

// Trees is the host's cache of extracted backups: <dir>/<backupID>/ holds the backup's tree,
// extracted once from its archive and shared read-only by every sandbox that restored the
// backup as a mount (sandbox.Manager.MountBackup: the tree is the overlay's lower layer). It is
// a treecache.Cache (an entry is complete or absent; dir is 0700). An entry stays while a
// sandbox mounts it, even after the backup is deleted or has expired (it is part of that
// sandbox's disk now); GC removes the others once unused for a while.
type Trees struct {
	trees *treecache.Cache
	blobs blob.Store
	log   *slog.Logger
}

// OpenTrees opens the tree cache in dir (created, 0700), extracting from the archives in
// blobs. It needs no sandbox manager, so the manager can be given it (sandbox.TreeSource) when
// it is built; the backup service takes it in Config.Trees. log nil: slog.Default().
func OpenTrees(dir string, blobs blob.Store, log *slog.Logger) (*Trees, error) {
	t, err := treecache.Open(dir, validID)
	if err != nil {
		return nil, fmt.Errorf("backup trees: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Trees{trees: t, blobs: blobs, log: log}, nil
}

// Tree returns the host directory of backup id's extracted tree, extracting it from the blob
// store first when it is not cached (concurrent calls extract once). A cached tree is returned
// even when the backup is gone: a sandbox that mounted it keeps it. Errors: BACKUP_NOT_FOUND
// (not cached and no archive), BACKUP_RESTORE_FAILED (the archive cannot be read or
// extracted), ctx's error.
func (t *Trees) Tree(ctx context.Context, id string) (string, error) {
	if !validID(id) {
		return "", notFound(id)
	}
	dst := t.trees.Path(id)
	if t.trees.Touch(id) {
		return dst, nil
	}
	defer t.trees.Lock(id)()
	if t.trees.Has(id) { // extracted while we waited
		return dst, nil
	}
	start := time.Now()
	if err := t.extract(ctx, id); err != nil {
		return "", err
	}
	t.log.InfoContext(ctx, "backup tree extracted", "backup_id", id, "took", time.Since(start).Round(time.Millisecond))
	return dst, nil
}

// extract streams backup id's archive through the zstd decoder into a temp directory of the
// cache (archive.ExtractLayer: the same safety rules as layers, small files in parallel) and
// adopts it.
func (t *Trees) extract(ctx context.Context, id string) error {
	rc, _, err := t.blobs.Get(ctx, archiveKey(id))
	if err != nil {
		if errdefs.CodeOf(err) == errdefs.CodeBlobNotFound {
			return notFound(id)
		}
		return restoreFailed(ctx, "the tree cache", fmt.Errorf("open archive: %w", err))
	}
	defer rc.Close()
	dec, err := zstd.NewReader(rc, zstd.WithDecoderConcurrency(0))
	if err != nil {
		return restoreFailed(ctx, "the tree cache", fmt.Errorf("zstd decoder: %w", err))
	}
	defer dec.Close()
	tmp, err := t.trees.TempDir()
	if err != nil {
		return fmt.Errorf("backup trees: %w", err)
	}
	err = archive.ExtractLayer(dec, tmp)
	if err == nil {
		_, err = io.Copy(io.Discard, dec) // the whole stream must decode
	}
	if err != nil {
		os.RemoveAll(tmp)
		return restoreFailed(ctx, "the tree cache", err)
	}
	return t.trees.Adopt(id, tmp)
}

// GC removes the cached trees that are not in used (backup IDs some sandbox mounts) and were
// last used more than minAge ago, and returns their IDs.
func (t *Trees) GC(ctx context.Context, used map[string]bool, minAge time.Duration) ([]string, error) {
	return t.trees.GC(ctx, used, minAge)
}
