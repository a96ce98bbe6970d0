package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/snapshot"
)

// Trees is the host's cache of extracted backups: <dir>/<backupID>/ holds the backup's tree,
// extracted once from its archive (into a temp directory, then renamed into place, so a present
// entry is complete) and shared read-only by every sandbox that restored the backup as a mount
// (sandbox.Manager.MountBackup: the tree is the overlay's lower layer, which overlayfs never
// writes). An entry stays while a sandbox mounts it, even after the backup is deleted or has
// expired (it is part of that sandbox's disk now); GC removes the others once unused for a
// while. dir is 0700: trees keep sandbox owners and setuid bits, which no host user may reach.
type Trees struct {
	dir string
	svc *Service

	mu       sync.Mutex             // guards fetching; GC holds it while it removes
	fetching map[string]*sync.Mutex // backup ID → lock of its extraction
}

func newTrees(dir string, svc *Service) (*Trees, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("backup trees: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("backup trees: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("backup trees: %w", err)
	}
	for _, e := range ents { // temp directories of extractions a crash cut short
		if strings.HasPrefix(e.Name(), ".") {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return &Trees{dir: dir, svc: svc, fetching: map[string]*sync.Mutex{}}, nil
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
	dst := filepath.Join(t.dir, id)
	t.mu.Lock()
	if _, err := os.Stat(dst); err == nil {
		now := time.Now()
		_ = os.Chtimes(dst, now, now)
		t.mu.Unlock()
		return dst, nil
	}
	l := t.fetching[id]
	if l == nil {
		l = &sync.Mutex{}
		t.fetching[id] = l
	}
	t.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	if _, err := os.Stat(dst); err == nil { // extracted while we waited
		return dst, nil
	}
	start := time.Now()
	if err := t.extract(ctx, id, dst); err != nil {
		return "", err
	}
	t.svc.log.InfoContext(ctx, "backup tree extracted", "backup_id", id, "took", time.Since(start).Round(time.Millisecond))
	return dst, nil
}

func (t *Trees) extract(ctx context.Context, id, dst string) error {
	rc, _, err := t.svc.cfg.Blobs.Get(ctx, archiveKey(id))
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
	tmp, err := os.MkdirTemp(t.dir, ".tmp-")
	if err != nil {
		return fmt.Errorf("backup trees: %w", err)
	}
	defer os.RemoveAll(tmp)
	tree := filepath.Join(tmp, "tree")
	if err := os.Mkdir(tree, 0o755); err != nil {
		return fmt.Errorf("backup trees: %w", err)
	}
	err = snapshot.ExtractLayer(dec, tree) // the same safety rules; small files in parallel
	if err == nil {
		_, err = io.Copy(io.Discard, dec) // the whole stream must decode
	}
	if err != nil {
		return restoreFailed(ctx, "the tree cache", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := os.Rename(tree, dst); err != nil {
		return fmt.Errorf("backup trees: %w", err)
	}
	return nil
}

// GC removes the cached trees that are not in used (backup IDs some sandbox mounts) and were
// last used more than minAge ago, and returns their IDs.
func (t *Trees) GC(ctx context.Context, used map[string]bool, minAge time.Duration) ([]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ents, err := os.ReadDir(t.dir)
	if err != nil {
		return nil, fmt.Errorf("backup trees gc: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		id := e.Name()
		if !validID(id) || used[id] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		fi, err := e.Info()
		if err != nil || time.Since(fi.ModTime()) < minAge {
			continue
		}
		trash := filepath.Join(t.dir, ".gc-"+id)
		if err := os.Rename(filepath.Join(t.dir, id), trash); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.RemoveAll(trash); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		removed = append(removed, id)
	}
	return removed, errors.Join(errs...)
}
