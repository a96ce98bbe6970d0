package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/archive"
	"github.com/hutchdev/hutch/internal/blob"
	"github.com/hutchdev/hutch/internal/treecache"
)

// Cache is the local layer cache: <dir>/sha256-<hex>/ holds one extracted layer (a
// treecache.Cache: made whole or not at all, shared read-only by every sandbox whose disk is
// built on it). Entries missing locally are fetched from the blob store on demand. GC removes
// entries no sandbox uses.
type Cache struct {
	trees *treecache.Cache
	blobs blob.Store
	log   *slog.Logger
}

// NewCache opens (creating) the cache in dir and removes temp directories a crash left.
func NewCache(dir string, blobs blob.Store, log *slog.Logger) (*Cache, error) {
	t, err := treecache.Open(dir, validDigest)
	if err != nil {
		return nil, fmt.Errorf("layer cache: %w", err)
	}
	return &Cache{trees: t, blobs: blobs, log: log}, nil
}

// Dir returns the cache's directory.
func (c *Cache) Dir() string { return c.trees.Dir() }

// Has reports whether the layer is in the cache.
func (c *Cache) Has(digest string) bool { return c.trees.Has(digest) }

// Path returns the local directory of layer digest ("sha256-<hex>"), fetching it from the blob
// store (layers/<digest>.tar.zst) and extracting it first when it is not cached. Concurrent
// calls for one digest fetch it once. The entry's time is set to now: GC spares recently used
// entries. Errors: VALIDATION_FAILED (bad digest), SNAPSHOT_NOT_FOUND (no such layer blob),
// SNAPSHOT_FAILED (the blob does not match its digest or cannot be extracted), ctx.Err().
func (c *Cache) Path(ctx context.Context, digest string) (string, error) {
	if !validDigest(digest) {
		return "", errdefs.Newf(errdefs.CodeInvalidArgument, "invalid layer digest %q", digest)
	}
	dst := c.trees.Path(digest)
	if c.trees.Touch(digest) {
		return dst, nil
	}
	defer c.trees.Lock(digest)()
	if c.trees.Has(digest) { // fetched while we waited
		return dst, nil
	}
	start := time.Now()
	if err := c.fetch(ctx, digest); err != nil {
		return "", err
	}
	c.log.InfoContext(ctx, "layer fetched", "digest", digest, "took", time.Since(start).Round(time.Millisecond))
	return dst, nil
}

// addFile puts the layer whose compressed tar is the file zst (digest known: the caller made
// it) into the cache, unless it is there already.
func (c *Cache) addFile(ctx context.Context, digest, zst string) error {
	defer c.trees.Lock(digest)()
	if c.trees.Touch(digest) {
		return nil
	}
	f, err := os.Open(zst)
	if err != nil {
		return fmt.Errorf("layer cache: %w", err)
	}
	defer f.Close()
	dec, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(0))
	if err != nil {
		return fmt.Errorf("layer %s: zstd: %w", digest, err)
	}
	defer dec.Close()
	tmp, err := c.trees.TempDir()
	if err != nil {
		return err
	}
	if err := archive.ExtractLayer(dec, tmp); err != nil {
		os.RemoveAll(tmp)
		if ctx.Err() != nil {
			return fmt.Errorf("layer %s: %w", digest, ctx.Err())
		}
		return fmt.Errorf("extract layer %s into the cache: %w", digest, err)
	}
	return c.trees.Adopt(digest, tmp)
}

// fetch streams the layer's blob through the zstd decoder into a temp directory, checks the
// tar's digest and moves the directory into place.
func (c *Cache) fetch(ctx context.Context, digest string) error {
	rc, _, err := c.blobs.Get(ctx, layerKey(digest))
	if err != nil {
		if errdefs.IsCode(err, errdefs.CodeBlobNotFound) {
			return errdefs.Newf(errdefs.CodeSnapshotNotFound, "layer %s is not in the blob store", digest).With("digest", digest)
		}
		return err
	}
	defer rc.Close()
	dec, err := zstd.NewReader(rc, zstd.WithDecoderConcurrency(0))
	if err != nil {
		return fmt.Errorf("layer %s: zstd: %w", digest, err)
	}
	defer dec.Close()
	tmp, err := c.trees.TempDir()
	if err != nil {
		return err
	}
	h := sha256.New()
	r := io.TeeReader(dec, h)
	if err := archive.ExtractLayer(r, tmp); err != nil {
		os.RemoveAll(tmp)
		if ctx.Err() != nil {
			return fmt.Errorf("layer %s: %w", digest, ctx.Err())
		}
		return errdefs.Wrap(errdefs.CodeSnapshotFailed, err, "extract layer "+digest)
	}
	if _, err := io.Copy(io.Discard, r); err != nil { // the tar's end padding counts too
		os.RemoveAll(tmp)
		return errdefs.Wrap(errdefs.CodeSnapshotFailed, err, "read layer "+digest)
	}
	if got := digestOf(h); got != digest {
		os.RemoveAll(tmp)
		return errdefs.Newf(errdefs.CodeSnapshotFailed, "layer blob %s has digest %s: corrupt or tampered", digest, got)
	}
	return c.trees.Adopt(digest, tmp)
}

// GC removes cached layers that are not in used and were last used (created, fetched or
// returned by Path) more than minAge ago, and returns their digests. Layers stay in the blob
// store; a later Path fetches them again.
func (c *Cache) GC(ctx context.Context, used map[string]bool, minAge time.Duration) ([]string, error) {
	removed, err := c.trees.GC(ctx, used, minAge)
	for _, d := range removed {
		c.log.InfoContext(ctx, "layer removed from cache", "digest", d)
	}
	return removed, err
}

// validDigest reports whether s is "sha256-" and 64 lowercase hex digits.
func validDigest(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256-")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

func digestOf(h hash.Hash) string { return "sha256-" + hex.EncodeToString(h.Sum(nil)) }

func layerKey(digest string) string { return "layers/" + digest + ".tar.zst" }
func metaKey(id string) string      { return "snapshots/" + id + ".json" }
