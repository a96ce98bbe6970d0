package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/blob"
)

// fakeDigest is a valid digest made from name.
func fakeDigest(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "sha256-" + hex.EncodeToString(sum[:])
}

// putBlob stores data under key.
func putBlob(t *testing.T, blobs blob.Store, key string, data []byte) {
	t.Helper()
	_, err := blobs.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)))
	must(t, err)
}

// putMeta stores a valid snapshot meta listing layers and returns its ID.
func putMeta(t *testing.T, blobs blob.Store, sandboxID string, layers ...string) string {
	t.Helper()
	snap := Snapshot{SandboxID: sandboxID, Image: Image{ID: "img", Name: "default"}, Format: Format,
		Config: SandboxConfig{InstanceType: "lite", EnvVars: map[string]string{}, SleepAfter: "10m"}}
	for _, d := range layers {
		snap.Layers = append(snap.Layers, Layer{Digest: d, SizeBytes: 1, CompressedBytes: 1})
	}
	snap.ID = contentID(snap)
	b, err := json.Marshal(snap)
	must(t, err)
	putBlob(t, blobs, metaKey(snap.ID), b)
	return snap.ID
}

func layerBlobs(t *testing.T, blobs blob.Store) []string {
	t.Helper()
	infos, err := blobs.List(context.Background(), "layers/")
	must(t, err)
	var out []string
	for _, in := range infos {
		out = append(out, in.Key)
	}
	return out
}

// TestGCBlobsDecision checks which layer blobs the blob GC deletes: those no snapshot meta
// lists, no sandbox record uses and old enough; never foreign keys.
func TestGCBlobsDecision(t *testing.T) {
	ctx := context.Background()
	cache, blobs := newCache(t)
	s := New(Config{Blobs: blobs, Cache: cache, Logger: slog.New(slog.DiscardHandler)})
	var (
		inA      = fakeDigest("only in snapshot A")
		shared   = fakeDigest("in A and B")
		inB      = fakeDigest("only in snapshot B")
		bySbx    = fakeDigest("used by a sandbox record only")
		orphan   = fakeDigest("referenced by nothing")
		foreign  = "layers/not-a-digest.tar.zst"
		allLayer = []string{inA, shared, inB, bySbx, orphan}
	)
	for _, d := range allLayer {
		putBlob(t, blobs, layerKey(d), []byte(d))
	}
	putBlob(t, blobs, foreign, []byte("x"))
	putMeta(t, blobs, "a", inA, shared)
	b := putMeta(t, blobs, "b", inB, shared)
	used := func() map[string]bool { return map[string]bool{bySbx: true} }

	// minAge spares young blobs.
	removed, err := s.gcBlobs(ctx, used(), time.Hour)
	must(t, err)
	if len(removed) != 0 {
		t.Fatalf("gc with minAge 1h removed %v", removed)
	}

	removed, err = s.gcBlobs(ctx, used(), 0)
	must(t, err)
	if !slices.Equal(removed, []string{orphan}) {
		t.Fatalf("gc removed %v; want only the orphan %s", removed, orphan)
	}

	// B's meta gone: its own layer goes, the one A shares stays.
	must(t, blobs.Delete(ctx, metaKey(b)))
	removed, err = s.gcBlobs(ctx, used(), 0)
	must(t, err)
	if !slices.Equal(removed, []string{inB}) {
		t.Fatalf("gc after deleting B removed %v; want %s", removed, inB)
	}
	// No sandbox uses bySbx any more.
	removed, err = s.gcBlobs(ctx, map[string]bool{}, 0)
	must(t, err)
	if !slices.Equal(removed, []string{bySbx}) {
		t.Fatalf("gc without users removed %v; want %s", removed, bySbx)
	}
	want := []string{foreign, layerKey(inA), layerKey(shared)}
	slices.Sort(want)
	if got := layerBlobs(t, blobs); !slices.Equal(got, want) {
		t.Fatalf("layer blobs left %v; want %v", got, want)
	}

	// A meta that cannot be read stops the GC before it deletes anything.
	putBlob(t, blobs, layerKey(orphan), []byte(orphan))
	putBlob(t, blobs, metaKey(fakeDigest("corrupt meta")), []byte("{not json"))
	if removed, err = s.gcBlobs(ctx, map[string]bool{}, 0); err == nil || len(removed) != 0 {
		t.Fatalf("gc with a corrupt meta = %v, %v; want an error and nothing removed", removed, err)
	}
	if !slices.Contains(layerBlobs(t, blobs), layerKey(orphan)) {
		t.Fatal("orphan deleted despite the corrupt meta")
	}
}

func TestDeleteValidation(t *testing.T) {
	cache, blobs := newCache(t)
	s := New(Config{Blobs: blobs, Cache: cache})
	if err := s.Delete(context.Background(), "nope"); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
		t.Fatalf("Delete(bad id) = %v; want VALIDATION_FAILED", err)
	}
	if err := s.Delete(context.Background(), fakeDigest("missing")); !errdefs.IsCode(err, errdefs.CodeSnapshotNotFound) {
		t.Fatalf("Delete(unknown) = %v; want SNAPSHOT_NOT_FOUND", err)
	}
}
