package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/blob"
)

// Cache is the local layer cache: <dir>/sha256-<hex>/ holds one extracted layer, made once
// (extracted into a temp directory, then renamed into place, so a present entry is always
// complete) and shared read-only by every sandbox whose disk is built on it (overlayfs never
// writes a lower layer). Entries missing locally are fetched from the blob store on demand.
// GC removes entries no sandbox uses. dir is 0700: layers keep sandbox owners and setuid bits,
// which no host user may reach.
type Cache struct {
	dir   string
	blobs blob.Store
	log   *slog.Logger

	mu       sync.Mutex             // guards fetching; GC holds it while it removes
	fetching map[string]*sync.Mutex // digest → lock of its fetch
}

// NewCache opens (creating) the cache in dir and removes temp directories a crash left.
func NewCache(dir string, blobs blob.Store, log *slog.Logger) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("layer cache: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("layer cache: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("layer cache: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return &Cache{dir: dir, blobs: blobs, log: log, fetching: map[string]*sync.Mutex{}}, nil
}

// Dir returns the cache's directory.
func (c *Cache) Dir() string { return c.dir }

func (c *Cache) entry(digest string) string { return filepath.Join(c.dir, digest) }

// tempDir makes an empty temp directory inside the cache (same file system: renames work).
func (c *Cache) tempDir() (string, error) {
	d, err := os.MkdirTemp(c.dir, ".tmp-")
	if err != nil {
		return "", fmt.Errorf("layer cache: %w", err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		os.RemoveAll(d)
		return "", fmt.Errorf("layer cache: %w", err)
	}
	return d, nil
}

// Has reports whether the layer is in the cache.
func (c *Cache) Has(digest string) bool {
	_, err := os.Stat(c.entry(digest))
	return err == nil
}

// adopt moves the extracted layer tmp into place as digest (or drops it when another copy got
// there first) and marks it used now.
func (c *Cache) adopt(digest, tmp string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	dst := c.entry(digest)
	if _, err := os.Stat(dst); err == nil {
		return os.RemoveAll(tmp)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("layer cache: %w", err)
	}
	now := time.Now()
	_ = os.Chtimes(dst, now, now)
	return nil
}

// Path returns the local directory of layer digest ("sha256-<hex>"), fetching it from the blob
// store (layers/<digest>.tar.zst) and extracting it first when it is not cached. Concurrent
// calls for one digest fetch it once. The entry's time is set to now: GC spares recently used
// entries. Errors: VALIDATION_FAILED (bad digest), SNAPSHOT_NOT_FOUND (no such layer blob),
// SNAPSHOT_FAILED (the blob does not match its digest or cannot be extracted), ctx.Err().
func (c *Cache) Path(ctx context.Context, digest string) (string, error) {
	if !validDigest(digest) {
		return "", errdefs.Newf(errdefs.CodeInvalidArgument, "invalid layer digest %q", digest)
	}
	dst := c.entry(digest)
	c.mu.Lock()
	if _, err := os.Stat(dst); err == nil {
		now := time.Now()
		_ = os.Chtimes(dst, now, now)
		c.mu.Unlock()
		return dst, nil
	}
	c.mu.Unlock()
	defer c.lockDigest(digest)()
	if _, err := os.Stat(dst); err == nil { // fetched while we waited
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
	unlock := c.lockDigest(digest)
	defer unlock()
	if c.Has(digest) {
		now := time.Now()
		_ = os.Chtimes(c.entry(digest), now, now)
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
	tmp, err := c.tempDir()
	if err != nil {
		return err
	}
	if err := ExtractLayer(dec, tmp); err != nil {
		os.RemoveAll(tmp)
		if ctx.Err() != nil {
			return fmt.Errorf("layer %s: %w", digest, ctx.Err())
		}
		return fmt.Errorf("extract layer %s into the cache: %w", digest, err)
	}
	return c.adopt(digest, tmp)
}

// lockDigest takes the lock of digest's fetch or addition and returns its unlock function.
func (c *Cache) lockDigest(digest string) func() {
	c.mu.Lock()
	l := c.fetching[digest]
	if l == nil {
		l = &sync.Mutex{}
		c.fetching[digest] = l
	}
	c.mu.Unlock()
	l.Lock()
	return l.Unlock
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
	tmp, err := c.tempDir()
	if err != nil {
		return err
	}
	h := sha256.New()
	r := io.TeeReader(dec, h)
	if err := ExtractLayer(r, tmp); err != nil {
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
	return c.adopt(digest, tmp)
}

// GC removes cached layers that are not in used and were last used (created, fetched or
// returned by Path) more than minAge ago, and returns their digests. Layers stay in the blob
// store; a later Path fetches them again.
func (c *Cache) GC(ctx context.Context, used map[string]bool, minAge time.Duration) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, fmt.Errorf("layer cache gc: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if !validDigest(name) || used[name] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		fi, err := e.Info()
		if err != nil || time.Since(fi.ModTime()) < minAge {
			continue
		}
		// Rename first: the entry disappears at once, the removal may take a while.
		trash := filepath.Join(c.dir, ".gc-"+name)
		if err := os.Rename(filepath.Join(c.dir, name), trash); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.RemoveAll(trash); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		removed = append(removed, name)
		c.log.InfoContext(ctx, "layer removed from cache", "digest", name)
	}
	return removed, errors.Join(errs...)
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
