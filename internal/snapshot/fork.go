package snapshot

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/sandboxid"
)

// MaxForks is the most sandboxes one Fork call creates.
const MaxForks = 64

// digests lists a snapshot's layer digests, newest first.
func (snap Snapshot) digests() []string {
	out := make([]string, len(snap.Layers))
	for i, l := range snap.Layers {
		out[i] = l.Digest
	}
	return out
}

// prefetch makes sure every layer of snap is in the local cache (fetching missing ones in
// parallel).
func (s *Service) prefetch(ctx context.Context, snap Snapshot) error {
	var wg sync.WaitGroup
	errs := make([]error, len(snap.Layers))
	for i, l := range snap.Layers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.cfg.Cache.Path(ctx, l.Digest)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// CreateSandbox is get-or-create of sandbox opts.ID from snapshot snapID: a new sandbox gets
// the snapshot's layers below a fresh disk of its own, its image, and its configuration for
// every option opts leaves empty (instance type, env vars, sleepAfter; keepAlive when either
// says so). An existing sandbox is returned as it is, like any get-or-create. created reports
// whether this call created it. Errors: those of Get and sandbox.Manager.GetOrCreate.
func (s *Service) CreateSandbox(ctx context.Context, opts sandbox.CreateOptions, snapID string) (sandbox.Info, bool, error) {
	if info, err := s.cfg.Sandboxes.Get(ctx, opts.ID); err == nil {
		return info, false, nil
	}
	snap, err := s.Get(ctx, snapID)
	if err != nil {
		return sandbox.Info{}, false, err
	}
	if err := s.prefetch(ctx, snap); err != nil {
		return sandbox.Info{}, false, err
	}
	return s.cfg.Sandboxes.GetOrCreate(ctx, fromSnapshot(opts, snap), nil)
}

// fromSnapshot fills opts from snap.
func fromSnapshot(opts sandbox.CreateOptions, snap Snapshot) sandbox.CreateOptions {
	opts.Image, opts.ImageName = snap.Image.ID, snap.Image.Name
	opts.Layers, opts.Snapshot = snap.digests(), snap.ID
	if opts.InstanceType == "" {
		opts.InstanceType = snap.Config.InstanceType
	}
	if opts.EnvVars == nil {
		opts.EnvVars = snap.Config.EnvVars
	}
	if opts.SleepAfter == 0 {
		if d, err := time.ParseDuration(snap.Config.SleepAfter); err == nil && sandbox.ValidateSleepAfter(d) == nil {
			opts.SleepAfter = d
		}
	}
	opts.KeepAlive = opts.KeepAlive || snap.Config.KeepAlive
	return opts
}

// ForkOptions choose the forks' IDs: IDs when given (exactly Count of them), else
// "<Prefix>-<i>" for i = 1…Count, Prefix defaulting to "<sandbox>-fork".
type ForkOptions struct {
	Count  int
	Prefix string
	IDs    []string
}

// Fork is a fork's result.
type Fork struct {
	sandbox.Info
	// StartMillis is how long creating and starting this fork took.
	StartMillis float64
}

// ForkResult is Fork's result, with timings in milliseconds.
type ForkResult struct {
	Snapshot   Snapshot
	Sandboxes  []Fork
	SnapshotMs float64 // taking the snapshot
	ForkMs     float64 // creating and starting all forks (in parallel)
	TotalMs    float64
}

// Fork snapshots sandbox id once and creates opts.Count sandboxes from the snapshot in
// parallel, each running when Fork returns. The forks share the snapshot's layers read-only
// (nothing is copied per fork) below a fresh disk of their own. If any fork fails, the ones
// made are destroyed and the error returned; when hutchd dies meanwhile, the next start
// destroys them (RecoverForks). Errors: VALIDATION_FAILED (count outside
// 1–MaxForks, bad or duplicate IDs), SANDBOX_ALREADY_EXISTS (a target ID is taken), those
// of Create and of sandbox creation.
func (s *Service) Fork(ctx context.Context, id string, opts ForkOptions) (ForkResult, error) {
	sid, err := sandboxid.Parse(id)
	if err != nil {
		return ForkResult{}, err
	}
	ids, err := forkIDs(sid, opts)
	if err != nil {
		return ForkResult{}, err
	}
	for _, fid := range ids {
		if _, err := s.cfg.Sandboxes.Get(ctx, fid); err == nil {
			return ForkResult{}, errdefs.Newf(errdefs.CodeSandboxExists, "sandbox %q already exists", fid).With("id", fid.String())
		} else if !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
			return ForkResult{}, err
		}
	}
	start := time.Now()
	snap, err := s.Create(ctx, id)
	if err != nil {
		return ForkResult{}, err
	}
	res := ForkResult{Snapshot: snap, SnapshotMs: ms(time.Since(start))}
	names := make([]string, len(ids))
	for i, fid := range ids {
		names[i] = fid.String()
	}
	endJournal, err := s.beginFork(id, snap.ID, names)
	if err != nil {
		return ForkResult{}, err
	}
	defer endJournal()
	forkStart := time.Now()
	if err := s.prefetch(ctx, snap); err != nil {
		return ForkResult{}, err
	}
	src, err := s.cfg.Sandboxes.Get(ctx, sid)
	if err != nil {
		return ForkResult{}, err
	}
	forks := make([]Fork, len(ids))
	errs := make([]error, len(ids))
	created := make([]bool, len(ids))
	var wg sync.WaitGroup
	for i, fid := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			opts := fromSnapshot(sandbox.CreateOptions{ID: fid, SleepAfter: parseSleep(src.SleepAfter), KeepAlive: src.KeepAlive, Runtime: src.Runtime}, snap)
			info, made, err := s.cfg.Sandboxes.GetOrCreate(ctx, opts, nil)
			created[i] = made
			if err == nil && !made {
				err = errdefs.Newf(errdefs.CodeSandboxExists, "sandbox %q already exists", fid).With("id", fid.String())
			}
			forks[i], errs[i] = Fork{Info: info, StartMillis: ms(time.Since(t))}, err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		dctx := context.WithoutCancel(ctx)
		for i, fid := range ids {
			if created[i] {
				if derr := s.cfg.Sandboxes.Destroy(dctx, fid); derr != nil {
					s.log.ErrorContext(ctx, "destroy fork after failure", "sandbox_id", fid, "err", derr)
				}
			}
		}
		return ForkResult{}, err
	}
	res.Sandboxes = forks
	res.ForkMs = ms(time.Since(forkStart))
	res.TotalMs = ms(time.Since(start))
	s.log.InfoContext(ctx, "sandbox forked", "sandbox_id", id, "snapshot", snap.ID, "forks", len(ids),
		"snapshot_ms", res.SnapshotMs, "fork_ms", res.ForkMs)
	return res, nil
}

func parseSleep(s string) time.Duration {
	d, _ := time.ParseDuration(s)
	return d
}

// forkIDs returns the IDs of the forks of sandbox id that opts ask for. Errors:
// VALIDATION_FAILED (count, repeated IDs), INVALID_SANDBOX_ID, RESERVED_SANDBOX_ID.
func forkIDs(id sandboxid.ID, opts ForkOptions) ([]sandboxid.ID, error) {
	n := opts.Count
	if n == 0 && len(opts.IDs) > 0 {
		n = len(opts.IDs)
	}
	if n < 1 || n > MaxForks {
		return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "count %d: want 1-%d forks", n, MaxForks).With("count", n)
	}
	names := opts.IDs
	if len(names) > 0 {
		if len(names) != n {
			return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "%d ids for %d forks", len(names), n)
		}
	} else {
		prefix := opts.Prefix
		if prefix == "" {
			prefix = id.String() + "-fork"
		}
		for i := 1; i <= n; i++ {
			names = append(names, prefix+"-"+strconv.Itoa(i))
		}
	}
	seen := map[sandboxid.ID]bool{id: true}
	ids := make([]sandboxid.ID, 0, len(names))
	for _, name := range names {
		fid, err := sandboxid.Parse(name)
		if err != nil {
			return nil, err
		}
		if seen[fid] {
			return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "fork ID %q repeats (or is the sandbox's own)", fid).With("id", fid.String())
		}
		seen[fid] = true
		ids = append(ids, fid)
	}
	return ids, nil
}

// Restore rebuilds sandbox id's disk from snapshot snapID: the sandbox is stopped if it runs,
// its own changes are discarded, its disk gets the snapshot's layers and image, and it is
// started again (sandbox.Manager.ResetDisk). Its settings (env vars, instance type, sleep) and
// exposed ports stay its own. Errors: those of Get, SANDBOX_NOT_FOUND, and the reset's.
func (s *Service) Restore(ctx context.Context, id, snapID string) (sandbox.Info, error) {
	sid, err := sandboxid.Parse(id)
	if err != nil {
		return sandbox.Info{}, err
	}
	if _, err := s.cfg.Sandboxes.Get(ctx, sid); err != nil {
		return sandbox.Info{}, err
	}
	snap, err := s.Get(ctx, snapID)
	if err != nil {
		return sandbox.Info{}, err
	}
	if err := s.prefetch(ctx, snap); err != nil {
		return sandbox.Info{}, err
	}
	defer s.sandboxLock(id)()
	return s.cfg.Sandboxes.ResetDisk(ctx, sid, sandbox.DiskSpec{
		Image: snap.Image.ID, ImageName: snap.Image.Name, Layers: snap.digests(), Snapshot: snap.ID,
	})
}

// GC removes cached layers no sandbox uses and nobody used for the configured minimum age.
func (s *Service) GC(ctx context.Context) ([]string, error) {
	used, err := s.cfg.Sandboxes.UsedLayers(ctx)
	if err != nil {
		return nil, err
	}
	return s.cfg.Cache.GC(ctx, used, s.cfg.CacheMinAge)
}

// RunGC runs GC and GCBlobs (sparing blobs younger than Config.BlobMinAge) now and then every
// interval (0: hourly) until ctx ends.
func (s *Service) RunGC(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Hour
	}
	for {
		if removed, err := s.GC(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "layer cache gc", "err", err)
		} else if len(removed) > 0 {
			s.log.InfoContext(ctx, "layer cache gc", "removed", len(removed))
		}
		if removed, err := s.GCBlobs(ctx, s.cfg.BlobMinAge); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "layer blob gc", "err", err)
		} else if len(removed) > 0 {
			s.log.InfoContext(ctx, "layer blob gc", "removed", len(removed))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
