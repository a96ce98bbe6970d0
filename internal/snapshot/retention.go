package snapshot

import (
	"context"
	"os"
	"slices"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// Retention and quotas. Every snapshot records its origin: OriginRequest (asked for through the
// API) or OriginSleep (taken as a sandbox with snapshotOnSleep fell asleep). Requested
// snapshots are the user's: nothing deletes them but a DELETE. Sleep snapshots are Hutch's:
//
//   - only the newest Config.SleepKeep of a sandbox are kept (default 1); each new one removes
//     the older ones, and the layer blobs nothing else references with them;
//   - they are deleted with their sandbox (SandboxDestroyed);
//   - they are the first to go when the sandbox's snapshots would exceed its quota.
//
// A sandbox's quota (Config.QuotaBytes) bounds the compressed bytes of the layers captured
// from it that its snapshots hold in the blob store (layers it was built on belong to the
// snapshots they were captured for, and are not counted again). A new snapshot that would
// pass it first evicts the sandbox's sleep snapshots, oldest first; if it still does not fit it
// is refused with SNAPSHOT_QUOTA_EXCEEDED, and nothing of it is stored.
//
// A snapshot's ID is its content: a sleep snapshot of a disk that a requested snapshot already
// captured has the requested one's ID, and stays a requested snapshot (its meta is kept).

// Snapshot origins.
const (
	OriginRequest = "request"
	OriginSleep   = "sleep"
)

// Retention defaults.
const (
	DefaultSleepKeep  = 1
	DefaultQuotaBytes = int64(20_000_000_000) // 20 GB of compressed layers per sandbox
)

// ownLayers returns the layers captured from the sandbox that snaps (its snapshots) hold,
// digest → compressed bytes.
func ownLayers(snaps []Snapshot) map[string]int64 {
	out := map[string]int64{}
	for _, sn := range snaps {
		for _, l := range sn.Layers {
			if !slices.Contains(sn.ParentLayers, l.Digest) {
				out[l.Digest] = l.CompressedBytes
			}
		}
	}
	return out
}

func sumBytes(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// makeRoom checks a new layer (digest, compressed size n) of sandboxID against its quota,
// evicting the sandbox's sleep snapshots (oldest first, never keepID) while it does not fit.
// It returns whether it deleted any meta (the caller runs the blob GC). Errors:
// SNAPSHOT_QUOTA_EXCEEDED, blob store errors.
func (s *Service) makeRoom(ctx context.Context, sandboxID, digest string, n int64, keepID string) (bool, error) {
	quota := s.cfg.QuotaBytes
	if quota <= 0 {
		return false, nil
	}
	snaps, err := s.List(ctx, sandboxID) // oldest first
	if err != nil {
		return false, err
	}
	evicted := false
	for {
		own := ownLayers(snaps)
		used := sumBytes(own)
		need := n
		if _, ok := own[digest]; ok {
			need = 0 // stored already, counted already
		}
		if used+need <= quota {
			return evicted, nil
		}
		i := slices.IndexFunc(snaps, func(sn Snapshot) bool { return sn.Origin == OriginSleep && sn.ID != keepID })
		if i < 0 {
			return evicted, errdefs.Newf(errdefs.CodeSnapshotQuota,
				"the snapshots of sandbox %q would hold %d bytes of the blob store, over its quota of %d: delete some of its snapshots", sandboxID, used+need, quota).
				With("quotaBytes", quota).With("usedBytes", used).With("layerBytes", need)
		}
		if err := s.deleteMeta(ctx, snaps[i].ID); err != nil {
			return evicted, err
		}
		s.log.InfoContext(ctx, "sleep snapshot evicted: quota", "sandbox_id", sandboxID, "snapshot", snaps[i].ID, "quota_bytes", quota)
		evicted = true
		snaps = slices.Delete(snaps, i, i+1)
	}
}

// pruneSleep deletes the sleep snapshots of sandboxID beyond the newest Config.SleepKeep
// (never keepID, the one just taken) and reports whether it deleted any.
func (s *Service) pruneSleep(ctx context.Context, sandboxID, keepID string) (bool, error) {
	snaps, err := s.List(ctx, sandboxID)
	if err != nil {
		return false, err
	}
	var sleep []Snapshot
	for _, sn := range snaps {
		if sn.Origin == OriginSleep && sn.ID != keepID {
			sleep = append(sleep, sn)
		}
	}
	keep := max(s.cfg.SleepKeep-1, 0) // keepID is one of them
	deleted := false
	for len(sleep) > keep {
		if err := s.deleteMeta(ctx, sleep[0].ID); err != nil {
			return deleted, err
		}
		s.log.InfoContext(ctx, "sleep snapshot pruned", "sandbox_id", sandboxID, "snapshot", sleep[0].ID, "keep", s.cfg.SleepKeep)
		deleted = true
		sleep = sleep[1:]
	}
	return deleted, nil
}

// deleteMeta removes snapshot id's meta (a meta already gone is no error).
func (s *Service) deleteMeta(ctx context.Context, id string) error {
	if err := s.cfg.Blobs.Delete(ctx, metaKey(id)); err != nil && !errdefs.IsCode(err, errdefs.CodeBlobNotFound) {
		return err
	}
	return nil
}

// collect runs the blob GC after metas were deleted, logging (not returning) its failure.
func (s *Service) collect(ctx context.Context) {
	if removed, err := s.GCBlobs(ctx, 0); err != nil {
		s.log.WarnContext(ctx, "layer blob gc", "err", err)
	} else if len(removed) > 0 {
		s.log.InfoContext(ctx, "layer blob gc", "removed", len(removed))
	}
}

// SandboxDestroyed deletes the sleep snapshots of the destroyed sandbox sandboxID, then, in
// the background, the layer blobs nothing references any more; sandbox.Manager calls it
// (sandbox.SleepSnapshotter) after a destroy. Its requested snapshots stay.
func (s *Service) SandboxDestroyed(ctx context.Context, sandboxID string) error {
	snaps, err := s.List(ctx, sandboxID)
	if err != nil {
		return err
	}
	n := 0
	for _, sn := range snaps {
		if sn.Origin != OriginSleep {
			continue
		}
		if err := s.deleteMeta(ctx, sn.ID); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return nil
	}
	s.log.InfoContext(ctx, "sleep snapshots deleted with their sandbox", "sandbox_id", sandboxID, "snapshots", n)
	// The GC waits for snapshots being made (blobGC): the destroy does not.
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
		defer cancel()
		s.collect(ctx)
	}()
	return nil
}

// fileSize is the size of the file at p, or 0.
func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}
