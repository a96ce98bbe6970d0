// Package snapshot captures a sandbox's whole disk as content-addressed layers in the blob
// store, and builds sandboxes on them: new sandboxes from a snapshot, forks (N sandboxes from
// one snapshot, in parallel) and restores of a sandbox to a snapshot.
//
// A sandbox's disk is an overlay: its own upper directory above zero or more snapshot layers
// above its image. A snapshot captures the upper directory — every changed file, and every
// deletion as overlayfs records it (whiteouts: 0/0 character devices; opaque directories:
// the trusted.overlay.opaque attribute) — as one new layer, a deterministic tar (archive.WriteLayer)
// whose sha256 names it:
//
//	blob layers/sha256-<digest of the tar>.tar.zst      the layer, zstd-compressed (multi-threaded)
//	blob snapshots/<snapshot id>.json                   {id, layers (newest first), parentLayers, image, config, …}
//
// The snapshot's ID is "sha256-" + the sha256 of its content (layers, image, configuration),
// so snapshotting an unchanged sandbox twice gives the same ID. A snapshot exists once its
// meta blob does: layers are uploaded first.
//
// Layers are extracted once into the local cache (Cache, <state>/layers/sha256-<hex>/) and
// shared read-only by every sandbox built on them; a sandbox from a snapshot gets the
// snapshot's layers as overlay lower directories and a fresh upper directory of its own, so
// creating one copies nothing and its writes are invisible to every other. The capture writes
// the layer's cache entry at the same time as its compressed blob, so forks on the same host
// never wait for a download; another host fetches layers from the blob store on first use.
package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/archive"
	"github.com/hutchdev/hutch/internal/blob"
	"github.com/hutchdev/hutch/internal/idmap"
	"github.com/hutchdev/hutch/internal/pzstd"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/sandboxid"
	"github.com/hutchdev/hutch/internal/store"
)

// Format is the layer format recorded in every snapshot.
const Format = "tar+zstd"

// Layer is one layer of a snapshot.
type Layer struct {
	Digest          string `json:"digest"`          // "sha256-<hex>" of the uncompressed tar
	SizeBytes       int64  `json:"sizeBytes"`       // uncompressed tar, bytes
	CompressedBytes int64  `json:"compressedBytes"` // the blob, bytes
}

// Image is the base image a snapshot's layers lie on.
type Image struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// SandboxConfig is the configuration a snapshot carries; sandboxes made from it get it unless
// their create request says otherwise.
type SandboxConfig struct {
	InstanceType string            `json:"instanceType"`
	EnvVars      map[string]string `json:"envVars"`
	SleepAfter   string            `json:"sleepAfter"` // Go duration
	KeepAlive    bool              `json:"keepAlive"`
}

// Snapshot is a snapshot's record (the meta blob, and the API's reply).
type Snapshot struct {
	ID        string    `json:"id"`        // "sha256-<hex>" of the content below
	SandboxID string    `json:"sandboxId"` // the sandbox it was taken of
	CreatedAt time.Time `json:"createdAt"`
	// SizeBytes is the compressed size of all its layers in the blob store.
	SizeBytes int64 `json:"sizeBytes"`
	// Layers, newest first: the captured disk, then the layers it was built on.
	Layers       []Layer       `json:"layers"`
	ParentLayers []string      `json:"parentLayers"` // the digests of Layers[1:] (or all, when nothing changed)
	Image        Image         `json:"image"`
	Config       SandboxConfig `json:"config"`
	Format       string        `json:"format"`
	// Origin is OriginRequest or OriginSleep (retention.go); "" in metas written before it
	// was recorded, which count as requested. Not part of the ID.
	Origin string `json:"origin,omitempty"`
}

// Config configures a Service.
type Config struct {
	Blobs     blob.Store
	Cache     *Cache
	Sandboxes *sandbox.Manager
	// TempDir holds compressed layers between capture and upload (same file system as the
	// cache is best); "" means the cache's directory.
	TempDir string
	// EncoderThreads is the zstd encoder's concurrency; 0 means runtime.NumCPU().
	EncoderThreads int
	// CacheMinAge: the cache GC spares layers used more recently (default 10 min).
	CacheMinAge time.Duration
	// BlobMinAge: the periodic blob GC spares layer blobs younger than this (default 10 min),
	// for writers on other hosts sharing the blob store.
	BlobMinAge time.Duration
	// SleepKeep is how many sleep snapshots of a sandbox are kept (retention.go); 0 means
	// DefaultSleepKeep.
	SleepKeep int
	// QuotaBytes bounds the blob store bytes of each sandbox's snapshots (retention.go); 0
	// means DefaultQuotaBytes, negative none.
	QuotaBytes int64
	Logger     *slog.Logger
	// ForkJournal is the directory of the fork journal (forkjournal.go), so that a fork a
	// crash cuts short is rolled back at the next start (RecoverForks); "" keeps none.
	ForkJournal string
	// Created, if set, is called after a snapshot's meta is stored (hutchd records the
	// sandbox's egress CA with it). An error is logged; the snapshot stands.
	Created func(ctx context.Context, snap Snapshot) error
}

// Service creates snapshots and sandboxes from them.
type Service struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex // sandbox ID → serialises snapshots and restores of it

	// blobGC excludes the blob GC (Lock) from snapshots being made (RLock, from the first
	// upload to the meta). See delete.go.
	blobGC sync.RWMutex
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.EncoderThreads <= 0 {
		cfg.EncoderThreads = runtime.NumCPU()
	}
	if cfg.TempDir == "" {
		cfg.TempDir = cfg.Cache.Dir()
	}
	if cfg.CacheMinAge <= 0 {
		cfg.CacheMinAge = 10 * time.Minute
	}
	if cfg.BlobMinAge <= 0 {
		cfg.BlobMinAge = 10 * time.Minute
	}
	if cfg.SleepKeep <= 0 {
		cfg.SleepKeep = DefaultSleepKeep
	}
	if cfg.QuotaBytes == 0 {
		cfg.QuotaBytes = DefaultQuotaBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, log: cfg.Logger, locks: map[string]*sync.Mutex{}}
}

func (s *Service) sandboxLock(id string) func() {
	s.mu.Lock()
	l := s.locks[id]
	if l == nil {
		l = &sync.Mutex{}
		s.locks[id] = l
	}
	s.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// captured is the result of capturing an upper directory.
type captured struct {
	rec     store.Sandbox
	stats   archive.LayerStats
	digest  string
	size    int64  // tar bytes
	zstPath string // compressed layer, to extract into the cache and upload
}

// Create snapshots sandbox id's whole disk and returns the snapshot. A running sandbox is
// frozen while its disk is read once into a compressed temp file (and its digest), then
// thawed; the local layer cache is filled from the temp file (unless it holds the layer
// already) and the upload to the blob store happens after the thaw. Errors:
// INVALID_SANDBOX_ID, SANDBOX_NOT_FOUND, SNAPSHOT_TOO_DEEP (the sandbox already has
// sandbox.MaxLayers layers), SNAPSHOT_FAILED, blob store errors (NO_SPACE, UNAVAILABLE).
func (s *Service) Create(ctx context.Context, sandboxID string) (Snapshot, error) {
	sid, err := sandboxid.Parse(sandboxID)
	if err != nil {
		return Snapshot{}, err
	}
	defer s.sandboxLock(sandboxID)()
	start := time.Now()
	var c captured
	err = s.cfg.Sandboxes.Capture(ctx, sid, func(ctx context.Context, rec store.Sandbox, disk sandbox.Disk) error {
		if len(rec.Layers) >= sandbox.MaxLayers {
			return errdefs.Newf(errdefs.CodeSnapshotTooDeep, "sandbox %q already has %d layers, the most a disk may have", sandboxID, len(rec.Layers))
		}
		c.rec = rec
		return s.capture(ctx, rec.IDMap(), disk, &c)
	})
	if err != nil {
		s.discard(&c)
		if errdefs.CodeOf(err) == errdefs.CodeInternal {
			return Snapshot{}, errdefs.Wrap(errdefs.CodeSnapshotFailed, err, "snapshot of "+sandboxID)
		}
		return Snapshot{}, err
	}
	defer s.discard(&c)
	return s.finish(ctx, &c, start, time.Since(start), OriginRequest)
}

// SnapshotAsleep snapshots the disk of the sleeping sandbox rec and
// returns the snapshot's ID: sandbox.Manager calls it, with the sandbox's ID lock held, at the
// end of every sleep of a sandbox with snapshotOnSleep (sandbox.SleepSnapshotter). Nothing is
// frozen: the container is gone. Errors: SNAPSHOT_TOO_DEEP, SNAPSHOT_FAILED, blob store errors.
func (s *Service) SnapshotAsleep(ctx context.Context, rec store.Sandbox, disk sandbox.Disk) (string, error) {
	if len(rec.Layers) >= sandbox.MaxLayers {
		return "", errdefs.Newf(errdefs.CodeSnapshotTooDeep, "sandbox %q already has %d layers, the most a disk may have", rec.ID, len(rec.Layers))
	}
	start := time.Now()
	c := captured{rec: rec}
	defer s.discard(&c)
	if err := s.capture(ctx, rec.IDMap(), disk, &c); err != nil {
		return "", errdefs.Wrap(errdefs.CodeSnapshotFailed, err, "snapshot of "+rec.ID)
	}
	snap, err := s.finish(ctx, &c, start, 0, OriginSleep)
	return snap.ID, err
}

// finish turns a capture into a snapshot: checked against the sandbox's quota, the layer
// adopted into the cache and uploaded, the meta written, older sleep snapshots pruned
// (retention.go). frozen is how long the sandbox was frozen (for the log).
func (s *Service) finish(ctx context.Context, c *captured, start time.Time, frozen time.Duration, origin string) (Snapshot, error) {
	gc := false
	defer func() {
		if gc { // after blobGC.RUnlock below: the GC takes it exclusively
			s.collect(ctx)
		}
	}()
	s.blobGC.RLock()
	defer s.blobGC.RUnlock()
	return s.record(ctx, c, start, frozen, origin, &gc)
}

// record is finish with blobGC held shared; *gc is set when metas were deleted.
func (s *Service) record(ctx context.Context, c *captured, start time.Time, frozen time.Duration, origin string, gc *bool) (Snapshot, error) {
	sandboxID := c.rec.ID
	snap := Snapshot{
		SandboxID: sandboxID,
		CreatedAt: time.Now().UTC().Truncate(time.Millisecond),
		Image:     Image{ID: c.rec.Image, Name: c.rec.ImageName},
		Config: SandboxConfig{
			InstanceType: c.rec.InstanceType, EnvVars: c.rec.EnvVars,
			SleepAfter: sandbox.FormatSleepAfter(c.rec.SleepAfter), KeepAlive: c.rec.KeepAlive,
		},
		Format:       Format,
		ParentLayers: append([]string{}, c.rec.Layers...),
		Origin:       origin,
	}
	if snap.Config.EnvVars == nil {
		snap.Config.EnvVars = map[string]string{}
	}
	if c.stats.Entries > 0 {
		evicted, err := s.makeRoom(ctx, sandboxID, c.digest, fileSize(c.zstPath), "")
		*gc = *gc || evicted
		if err != nil {
			return Snapshot{}, err
		}
		if err := s.cfg.Cache.addFile(ctx, c.digest, c.zstPath); err != nil {
			return Snapshot{}, errdefs.Wrap(errdefs.CodeSnapshotFailed, err, "snapshot of "+sandboxID)
		}
		n, err := s.upload(ctx, c.digest, c.zstPath)
		if err != nil {
			return Snapshot{}, err
		}
		snap.Layers = append(snap.Layers, Layer{Digest: c.digest, SizeBytes: c.size, CompressedBytes: n})
	}
	parents, err := s.parentLayers(ctx, c.rec)
	if err != nil {
		return Snapshot{}, err
	}
	snap.Layers = append(snap.Layers, parents...)
	for _, l := range snap.Layers {
		snap.SizeBytes += l.CompressedBytes
	}
	snap.ID = contentID(snap)
	if origin == OriginSleep {
		// The same disk snapshotted on request before: it stays the user's.
		if prev, err := s.Get(ctx, snap.ID); err == nil && prev.Origin != OriginSleep {
			snap.Origin = prev.Origin
		}
	}
	b, err := json.MarshalIndent(snap, "", "  ")
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot meta: %w", err)
	}
	if _, err := s.cfg.Blobs.Put(ctx, metaKey(snap.ID), bytes.NewReader(b), int64(len(b))); err != nil {
		return Snapshot{}, fmt.Errorf("snapshot meta: %w", err)
	}
	if s.cfg.Created != nil {
		if err := s.cfg.Created(ctx, snap); err != nil {
			s.log.WarnContext(ctx, "snapshot: created hook", "snapshot", snap.ID, "err", err)
		}
	}
	if origin == OriginSleep {
		pruned, err := s.pruneSleep(ctx, sandboxID, snap.ID)
		*gc = *gc || pruned
		if err != nil {
			s.log.WarnContext(ctx, "sleep snapshot pruning", "sandbox_id", sandboxID, "err", err)
		}
	}
	s.log.InfoContext(ctx, "snapshot created", "sandbox_id", sandboxID, "snapshot", snap.ID, "layers", len(snap.Layers),
		"entries", c.stats.Entries, "tar_bytes", c.size, "frozen", frozen.Round(time.Millisecond), "took", time.Since(start).Round(time.Millisecond))
	return snap, nil
}

// capture writes the tar of the disk once, into the hash and a zstd temp file. It is the only
// part of a snapshot that runs while the sandbox is frozen; the layer cache is filled from the
// temp file afterwards (finish). idm is the sandbox's ID range: owners on its disk are host IDs
// of the range, and the layer records in-sandbox IDs.
func (s *Service) capture(ctx context.Context, idm idmap.Map, disk sandbox.Disk, c *captured) error {
	f, err := os.CreateTemp(s.cfg.TempDir, ".layer-*.tar.zst")
	if err != nil {
		return fmt.Errorf("snapshot temp file: %w", err)
	}
	c.zstPath = f.Name()
	defer f.Close()
	enc, err := pzstd.NewWriter(f, s.cfg.EncoderThreads, zstd.SpeedFastest)
	if err != nil {
		return fmt.Errorf("zstd encoder: %w", err)
	}
	h := sha256.New()
	cw := &countWriter{}
	stats, werr := archive.WriteLayer(ctx, io.MultiWriter(h, cw, enc), disk.Upper,
		archive.LayerOptions{Mounts: disk.Mounts, Owner: idm.SandboxOwner()})
	cerr := enc.Close()
	if werr != nil {
		return werr
	}
	if cerr != nil {
		return fmt.Errorf("zstd: %w", cerr)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.stats, c.digest, c.size = stats, digestOf(h), cw.n
	return f.Close()
}

// discard removes what a capture left behind.
func (s *Service) discard(c *captured) {
	if c.zstPath != "" {
		os.Remove(c.zstPath)
		c.zstPath = ""
	}
}

// upload puts the compressed layer into the blob store unless it is there already, and
// returns its size.
func (s *Service) upload(ctx context.Context, digest, path string) (int64, error) {
	if info, err := s.cfg.Blobs.Stat(ctx, layerKey(digest)); err == nil {
		return info.Size, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("snapshot upload: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("snapshot upload: %w", err)
	}
	n, err := s.cfg.Blobs.Put(ctx, layerKey(digest), f, fi.Size())
	if err != nil {
		return 0, fmt.Errorf("snapshot upload of layer %s: %w", digest, err)
	}
	return n, nil
}

// parentLayers describes the layers rec's disk is built on: from the meta of the snapshot
// they came from when it has them, else from the blob store.
func (s *Service) parentLayers(ctx context.Context, rec store.Sandbox) ([]Layer, error) {
	if len(rec.Layers) == 0 {
		return nil, nil
	}
	known := map[string]Layer{}
	if rec.Snapshot != "" {
		if parent, err := s.Get(ctx, rec.Snapshot); err == nil {
			for _, l := range parent.Layers {
				known[l.Digest] = l
			}
		}
	}
	out := make([]Layer, 0, len(rec.Layers))
	for _, d := range rec.Layers {
		l, ok := known[d]
		if !ok {
			info, err := s.cfg.Blobs.Stat(ctx, layerKey(d))
			if err != nil {
				return nil, fmt.Errorf("layer %s of sandbox %s: %w", d, rec.ID, err)
			}
			l = Layer{Digest: d, SizeBytes: -1, CompressedBytes: info.Size}
		}
		out = append(out, l)
	}
	return out, nil
}

// contentID is a snapshot's ID: the sha256 of its layers, image and configuration.
func contentID(snap Snapshot) string {
	digests := make([]string, len(snap.Layers))
	for i, l := range snap.Layers {
		digests[i] = l.Digest
	}
	b, _ := json.Marshal(struct {
		Layers []string      `json:"layers"`
		Image  string        `json:"image"`
		Config SandboxConfig `json:"config"`
	}{digests, snap.Image.ID, snap.Config}) // map keys are sorted: canonical
	sum := sha256.Sum256(b)
	return "sha256-" + hex.EncodeToString(sum[:])
}

// Get returns snapshot id's record from the blob store. Errors: VALIDATION_FAILED (not
// "sha256-<hex>"), SNAPSHOT_NOT_FOUND.
func (s *Service) Get(ctx context.Context, id string) (Snapshot, error) {
	return Records{s.cfg.Blobs}.Get(ctx, id)
}

// Records reads snapshot records from a blob store; unlike Service it needs no sandbox
// manager, so what the manager is built with can look snapshots up (the egress policy a fork
// inherits).
type Records struct{ Blobs blob.Store }

// Get is Service.Get.
func (r Records) Get(ctx context.Context, id string) (Snapshot, error) {
	if !validDigest(id) {
		return Snapshot{}, errdefs.Newf(errdefs.CodeInvalidArgument, "invalid snapshot ID %q: want sha256-<64 hex digits>", id).With("snapshot", id)
	}
	rc, _, err := r.Blobs.Get(ctx, metaKey(id))
	if err != nil {
		if errdefs.IsCode(err, errdefs.CodeBlobNotFound) {
			return Snapshot{}, errdefs.Newf(errdefs.CodeSnapshotNotFound, "snapshot %q not found", id).With("snapshot", id)
		}
		return Snapshot{}, err
	}
	defer rc.Close()
	var snap Snapshot
	if err := json.NewDecoder(io.LimitReader(rc, 1<<20)).Decode(&snap); err != nil {
		return Snapshot{}, errdefs.Wrap(errdefs.CodeSnapshotFailed, err, "snapshot "+id+": bad meta")
	}
	if snap.ID != id || contentID(snap) != id {
		return Snapshot{}, errdefs.Newf(errdefs.CodeSnapshotFailed, "snapshot %s: meta does not match its ID", id)
	}
	if len(snap.Layers) > sandbox.MaxLayers {
		return Snapshot{}, errdefs.Newf(errdefs.CodeSnapshotTooDeep, "snapshot %s has %d layers", id, len(snap.Layers))
	}
	for _, l := range snap.Layers {
		if !validDigest(l.Digest) {
			return Snapshot{}, errdefs.Newf(errdefs.CodeSnapshotFailed, "snapshot %s: bad layer digest %q", id, l.Digest)
		}
	}
	return snap, nil
}

// List returns every snapshot in the blob store (optionally only those of sandboxID), oldest
// first.
func (s *Service) List(ctx context.Context, sandboxID string) ([]Snapshot, error) {
	infos, err := s.cfg.Blobs.List(ctx, "snapshots/")
	if err != nil {
		return nil, err
	}
	out := []Snapshot{}
	for _, in := range infos {
		id := filepath.Base(in.Key)
		id = id[:len(id)-len(filepath.Ext(id))]
		snap, err := s.Get(ctx, id)
		if err != nil {
			continue // a meta removed meanwhile, or foreign junk
		}
		if sandboxID == "" || snap.SandboxID == sandboxID {
			out = append(out, snap)
		}
	}
	slices.SortStableFunc(out, func(a, b Snapshot) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }
