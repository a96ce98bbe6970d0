package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/archive"
	"github.com/hutchdev/hutch/internal/blob"
)

// layerOf returns the layer tar of dir and its digest.
func layerOf(t *testing.T, dir string) ([]byte, string) {
	t.Helper()
	var tarBuf bytes.Buffer
	_, err := archive.WriteLayer(context.Background(), &tarBuf, dir, archive.LayerOptions{})
	must(t, err)
	sum := sha256.Sum256(tarBuf.Bytes())
	return tarBuf.Bytes(), "sha256-" + hex.EncodeToString(sum[:])
}

// putLayer stores the tar of dir in blobs as a layer and returns its digest.
func putLayer(t *testing.T, blobs blob.Store, dir string) string {
	t.Helper()
	tarBytes, digest := layerOf(t, dir)
	var z bytes.Buffer
	enc, _ := zstd.NewWriter(&z)
	enc.Write(tarBytes)
	must(t, enc.Close())
	_, err := blobs.Put(context.Background(), layerKey(digest), bytes.NewReader(z.Bytes()), int64(z.Len()))
	must(t, err)
	return digest
}

func newCache(t *testing.T) (*Cache, blob.Store) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	blobs, err := blob.NewLocal(filepath.Join(t.TempDir(), "blobs"), log)
	must(t, err)
	c, err := NewCache(filepath.Join(t.TempDir(), "layers"), blobs, log)
	must(t, err)
	return c, blobs
}

func TestCacheFetchOnDemandAndGC(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	c, blobs := newCache(t)
	src := t.TempDir()
	upperTree(t, src)
	digest := putLayer(t, blobs, src)

	if c.Has(digest) {
		t.Fatal("cached before first use")
	}
	p, err := c.Path(ctx, digest)
	must(t, err)
	if p != filepath.Join(c.Dir(), digest) || !c.Has(digest) {
		t.Fatalf("Path = %s", p)
	}
	// The layer of the cached tree is the layer itself: it holds the same tree.
	if _, got := layerOf(t, p); got != digest {
		t.Errorf("the cached tree's layer is %s, want %s", got, digest)
	}
	// A second Path is a cache hit even with the blob gone.
	must(t, blobs.Delete(ctx, layerKey(digest)))
	if _, err := c.Path(ctx, digest); err != nil {
		t.Fatalf("cache hit: %v", err)
	}
	// GC keeps used and recent entries, removes old unused ones.
	if removed, err := c.GC(ctx, map[string]bool{}, time.Hour); err != nil || len(removed) != 0 {
		t.Fatalf("GC of a recent entry: %v, %v", removed, err)
	}
	old := time.Now().Add(-2 * time.Hour)
	must(t, os.Chtimes(p, old, old))
	if removed, err := c.GC(ctx, map[string]bool{digest: true}, time.Hour); err != nil || len(removed) != 0 {
		t.Fatalf("GC of a used entry: %v, %v", removed, err)
	}
	if removed, err := c.GC(ctx, map[string]bool{}, time.Hour); err != nil || len(removed) != 1 || removed[0] != digest {
		t.Fatalf("GC of an old unused entry: %v, %v", removed, err)
	}
	if c.Has(digest) {
		t.Fatal("entry still cached after GC")
	}
	ents, _ := os.ReadDir(c.Dir())
	if len(ents) != 0 {
		t.Errorf("cache dir not empty after GC: %v", ents)
	}
	// Gone from cache and blob store: SNAPSHOT_NOT_FOUND.
	if _, err := c.Path(ctx, digest); !errdefs.IsCode(err, errdefs.CodeSnapshotNotFound) {
		t.Fatalf("missing layer: %v", err)
	}
	if _, err := c.Path(ctx, "sha256-nothex"); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
		t.Fatalf("bad digest: %v", err)
	}
}

// A blob whose content does not match its digest is refused and leaves nothing in the cache.
func TestCacheRefusesTamperedLayer(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	c, blobs := newCache(t)
	src := t.TempDir()
	must(t, os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644))
	digest := putLayer(t, blobs, src)
	other := t.TempDir()
	must(t, os.WriteFile(filepath.Join(other, "f"), []byte("tampered"), 0o644))
	otherDigest := putLayer(t, blobs, other)
	rc, info, err := blobs.Get(ctx, layerKey(otherDigest))
	must(t, err)
	_, err = blobs.Put(ctx, layerKey(digest), rc, info.Size)
	rc.Close()
	must(t, err)
	if _, err := c.Path(ctx, digest); !errdefs.IsCode(err, errdefs.CodeSnapshotFailed) {
		t.Fatalf("tampered layer: %v", err)
	}
	ents, _ := os.ReadDir(c.Dir())
	if len(ents) != 0 {
		t.Errorf("cache holds %v after a refused layer", ents)
	}
}

func TestForkIDs(t *testing.T) {
	cases := []struct {
		opts ForkOptions
		want []string
		err  errdefs.Code
	}{
		{ForkOptions{Count: 2}, []string{"src-fork-1", "src-fork-2"}, ""},
		{ForkOptions{Count: 2, Prefix: "w"}, []string{"w-1", "w-2"}, ""},
		{ForkOptions{IDs: []string{"a", "b"}}, []string{"a", "b"}, ""},
		{ForkOptions{Count: 0}, nil, errdefs.CodeInvalidArgument},
		{ForkOptions{Count: MaxForks + 1}, nil, errdefs.CodeInvalidArgument},
		{ForkOptions{Count: 3, IDs: []string{"a"}}, nil, errdefs.CodeInvalidArgument},
		{ForkOptions{IDs: []string{"a", "a"}}, nil, errdefs.CodeInvalidArgument},
		{ForkOptions{IDs: []string{"src"}}, nil, errdefs.CodeInvalidArgument},
		{ForkOptions{IDs: []string{"Bad"}}, nil, errdefs.CodeInvalidSandboxID},
	}
	for _, c := range cases {
		got, err := forkIDs("src", c.opts)
		if c.err != "" {
			if !errdefs.IsCode(err, c.err) {
				t.Errorf("%+v: err %v, want %s", c.opts, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) || (len(got) > 0 && got[0].String() != c.want[0]) {
			t.Errorf("%+v: %v, %v; want %v", c.opts, got, err, c.want)
		}
	}
}
