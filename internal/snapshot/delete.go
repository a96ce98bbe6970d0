package snapshot

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// Deletion and the blob GC. A snapshot is its meta blob: Delete removes it, then GCBlobs
// removes every layer blob that no remaining snapshot meta lists and no sandbox record's disk
// is built on. Layers are shared between snapshots (a snapshot of a sandbox built on layers
// lists them too) and between sandboxes, so a layer lives as long as anything names it.
//
// The GC takes blobGC exclusively; a snapshot in progress holds it shared from its first
// upload to its meta, so it never loses a layer to a GC that runs meanwhile. Layer blobs
// younger than minAge are spared, for writers this process does not know of (another host
// sharing the blob store). A sandbox created from (or restored to) a snapshot that is deleted
// at the same moment may get a record naming layers whose blobs are gone: it runs on the local
// cache, which keeps layers any record uses, but another host could not fetch them.

// Delete removes snapshot id and then the layer blobs nothing references any more (GCBlobs
// with no minimum age). Sandboxes built on its layers keep working: their records reference
// the layers, so those blobs stay until the last such sandbox is destroyed and a later GC
// runs. Errors: VALIDATION_FAILED (not "sha256-<hex>"), SNAPSHOT_NOT_FOUND, blob store errors.
// A failing GC after the meta is gone is logged, not returned: the snapshot is deleted.
func (s *Service) Delete(ctx context.Context, id string) error {
	if !validDigest(id) {
		return errdefs.Newf(errdefs.CodeInvalidArgument, "invalid snapshot ID %q: want sha256-<64 hex digits>", id).With("snapshot", id)
	}
	if _, err := s.cfg.Blobs.Stat(ctx, metaKey(id)); err != nil {
		if errdefs.IsCode(err, errdefs.CodeBlobNotFound) {
			return errdefs.Newf(errdefs.CodeSnapshotNotFound, "snapshot %q not found", id).With("snapshot", id)
		}
		return err
	}
	if err := s.cfg.Blobs.Delete(ctx, metaKey(id)); err != nil {
		return err
	}
	s.log.InfoContext(ctx, "snapshot deleted", "snapshot", id)
	if removed, err := s.GCBlobs(ctx, 0); err != nil {
		s.log.WarnContext(ctx, "layer blob gc after snapshot delete", "snapshot", id, "err", err)
	} else if len(removed) > 0 {
		s.log.InfoContext(ctx, "layer blob gc", "removed", len(removed))
	}
	return nil
}

// GCBlobs deletes the layer blobs (layers/sha256-<hex>.tar.zst) that no snapshot meta in the
// blob store lists, no sandbox record uses, and that are at least minAge old, and returns
// their digests. A meta that cannot be read keeps nothing alive but stops the GC (an
// unreadable meta might name layers): it returns the error and deletes nothing.
func (s *Service) GCBlobs(ctx context.Context, minAge time.Duration) ([]string, error) {
	s.blobGC.Lock()
	defer s.blobGC.Unlock()
	used, err := s.cfg.Sandboxes.UsedLayers(ctx)
	if err != nil {
		return nil, err
	}
	return s.gcBlobs(ctx, used, minAge)
}

// gcBlobs is GCBlobs with the layers sandbox records use (kept, and added to) given. The
// caller holds blobGC.
func (s *Service) gcBlobs(ctx context.Context, keep map[string]bool, minAge time.Duration) ([]string, error) {
	metas, err := s.cfg.Blobs.List(ctx, "snapshots/")
	if err != nil {
		return nil, err
	}
	for _, in := range metas {
		id, ok := strings.CutSuffix(strings.TrimPrefix(in.Key, "snapshots/"), ".json")
		if !ok || !validDigest(id) {
			continue // not a snapshot meta
		}
		snap, err := s.Get(ctx, id)
		if errdefs.IsCode(err, errdefs.CodeSnapshotNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		for _, l := range snap.Layers {
			keep[l.Digest] = true
		}
	}
	layers, err := s.cfg.Blobs.List(ctx, "layers/")
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	now := time.Now()
	for _, in := range layers {
		digest, ok := strings.CutSuffix(strings.TrimPrefix(in.Key, "layers/"), ".tar.zst")
		if !ok || !validDigest(digest) || keep[digest] || now.Sub(in.ModTime) < minAge {
			continue
		}
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		if err := s.cfg.Blobs.Delete(ctx, in.Key); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, digest)
		s.log.InfoContext(ctx, "layer blob deleted", "digest", digest)
	}
	return removed, errors.Join(errs...)
}
