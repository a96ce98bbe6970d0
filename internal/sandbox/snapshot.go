package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/sandboxid"
	"github.com/hutchdev/hutch/internal/store"
)

// Snapshot support. A sandbox's disk is an overlay: its own upper directory above zero or more
// snapshot layers (read-only directories of the local layer cache, newest first) above its
// image. The snapshot service (internal/snapshot) captures upper directories (Capture), creates
// sandboxes on layers (CreateOptions.Layers) and rebases sandboxes (ResetDisk); the manager
// only mounts what the record says.

// MaxLayers is the most snapshot layers a sandbox's disk may have: overlayfs takes its lower
// directories in one mount option of at most a page, and each layer is a path under the state
// directory.
const MaxLayers = 24

// LayerSource resolves a layer digest ("sha256-<hex>") to the local directory holding it,
// fetching it on demand. internal/snapshot's Cache implements it.
type LayerSource interface {
	Path(ctx context.Context, digest string) (string, error)
}

// lowerDirs is the overlay lower argument of rec's disk: its layers (newest first), then the
// image root.
func (m *Manager) lowerDirs(ctx context.Context, rec store.Sandbox, imageRoot string) (string, error) {
	if len(rec.Layers) == 0 {
		return imageRoot, nil
	}
	if m.layers == nil {
		return "", errdefs.New(errdefs.CodeUnavailable, "snapshot layers are not available on this host")
	}
	dirs := make([]string, 0, len(rec.Layers)+1)
	for _, d := range rec.Layers {
		p, err := m.layers.Path(ctx, d)
		if err != nil {
			return "", fmt.Errorf("layer %s: %w", d, err)
		}
		dirs = append(dirs, p)
	}
	return strings.Join(append(dirs, imageRoot), ":"), nil
}

// Disk is what a snapshot reads of a sandbox's disk: its upper directory (its own changes to
// the image and layers below) and a read-only view of each of its directory mounts (restored
// backups, dirmount.go), by path inside the sandbox.
type Disk struct {
	Upper  string
	Mounts map[string]string
}

// DefaultMaxFrozen is Config.MaxFrozen's default: how long a capture may keep a running
// sandbox frozen.
const DefaultMaxFrozen = time.Minute

// Capture calls fn with sandbox id's record and its disk (see Disk) while nothing can write to
// it, and returns fn's error. A running sandbox is frozen (the runtime's Pauser: the cgroup
// freezer) for fn's whole duration and its file system synced (syncfs) first, then thawed; a
// sandbox that is not running (sleeping, stopped) is only synced. Lifecycle operations on the
// sandbox wait meanwhile (the ID lock is held); requests to its agent stall until it is thawed.
//
// fn's ctx ends, and fn must then stop and return, when the caller's ctx does (a client that
// gives up), when the sandbox has been frozen for Config.MaxFrozen (a disk too large to read
// in that time: the sandbox is not held frozen longer, the capture fails with
// SNAPSHOT_FROZEN_TOO_LONG), or when a Destroy of the sandbox begins (a destroy never waits for
// a capture: it cancels it). The sandbox is thawed in every case.
// Errors: SANDBOX_NOT_FOUND, NOT_IMPLEMENTED (the runtime cannot pause),
// the runtime's pause error, SNAPSHOT_FROZEN_TOO_LONG, fn's error.
func (m *Manager) Capture(ctx context.Context, sid sandboxid.ID, fn func(ctx context.Context, rec store.Sandbox, disk Disk) error) (err error) {
	id := sid.String()
	ctx, done := m.cancellable(ctx, id)
	defer done()
	base := ctx                // ended by the caller or a destroy (done runs after the check below)
	var tooLong error          // the frozen-time bound's cause, once the sandbox is frozen
	var frozen context.Context // base with the bound, once the sandbox is frozen
	defer func() {
		// Whatever step a cancel cut, the error says why it came. (frozen's own stop has run
		// by now: only a cause of tooLong says the bound ended it.)
		if err == nil {
			return
		}
		switch {
		case frozen != nil && errors.Is(context.Cause(frozen), tooLong) && base.Err() == nil:
			m.log.WarnContext(base, "capture abandoned: frozen too long", "sandbox_id", id)
			err = tooLong
		case base.Err() != nil:
			cause := context.Cause(base)
			m.log.WarnContext(base, "capture abandoned", "sandbox_id", id, "cause", cause)
			if errdefs.CodeOf(cause) != errdefs.CodeInternal {
				err = cause // a destroy's, with its code
			}
		}
	}()
	unlock := m.lock(id)
	defer unlock()
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	rec, err := m.store.Get(ctx, id)
	if err != nil {
		return err
	}
	m.mu.RLock()
	inst := m.instances[id]
	m.mu.RUnlock()
	releaseDisk, err := m.holdDisk(ctx, id) // a sleeping sandbox's disk is not mounted
	if err != nil {
		return err
	}
	defer releaseDisk()
	upper := m.upperDir(id)
	if inst != nil {
		rt, err := m.runtimeOf(rec)
		if err != nil {
			return err
		}
		p, ok := rt.(runtime.Pauser)
		if !ok {
			return errdefs.Newf(errdefs.CodeNotImplemented, "runtime %s cannot pause a running sandbox", rt.Name())
		}
		maxFrozen := m.cfg.MaxFrozen
		if maxFrozen <= 0 {
			maxFrozen = DefaultMaxFrozen
		}
		tooLong = errdefs.Newf(errdefs.CodeSnapshotFrozenTooLong,
			"the capture of %s did not finish within %v, the longest a sandbox is kept frozen: the sandbox was thawed; make its disk smaller (or sparse), snapshot it asleep, or raise hutchd's snapshotMaxFrozen", id, maxFrozen).
			With("maxFrozen", maxFrozen.String())
		start := time.Now()
		thaw := func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := p.Resume(rctx, id); err != nil {
				m.log.ErrorContext(rctx, "thaw after capture failed", "sandbox_id", id, "err", err)
			}
			inst.touch()
			m.log.InfoContext(ctx, "sandbox frozen for capture", "sandbox_id", id, "took", time.Since(start).Round(time.Millisecond))
		}
		// The freeze is not cut by a cancel: a runtime killed part way through it can leave the
		// cgroup frozen with nobody to thaw it. A failed freeze is thawed too, for the same
		// reason.
		pctx, pcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		err = p.Pause(pctx, id)
		pcancel()
		if err != nil {
			thaw()
			return fmt.Errorf("freeze %s: %w", id, err)
		}
		defer thaw()
		if err := ctx.Err(); err != nil { // cancelled during the freeze
			return context.Cause(ctx)
		}
		var stop context.CancelFunc
		frozen, stop = context.WithTimeoutCause(ctx, maxFrozen, tooLong)
		defer stop()
		ctx = frozen
	}
	if err := syncDir(upper); err != nil {
		return fmt.Errorf("flush disk of %s: %w", id, err)
	}
	views, release, err := m.dirMountViews(ctx, id)
	if err != nil {
		return err
	}
	defer release()
	return fn(ctx, rec, Disk{Upper: upper, Mounts: views})
}

// cancellable returns ctx made cancellable by a Destroy of sandbox id (cancelCaptures), and
// the release of that registration.
func (m *Manager) cancellable(ctx context.Context, id string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	m.capMu.Lock()
	if m.captures == nil {
		m.captures = map[string]map[*context.CancelCauseFunc]bool{}
	}
	if m.captures[id] == nil {
		m.captures[id] = map[*context.CancelCauseFunc]bool{}
	}
	key := &cancel
	m.captures[id][key] = true
	if m.capDestroying[id] > 0 {
		cancel(destroyingErr(id))
	}
	m.capMu.Unlock()
	return ctx, func() {
		m.capMu.Lock()
		delete(m.captures[id], key)
		if len(m.captures[id]) == 0 {
			delete(m.captures, id)
		}
		m.capMu.Unlock()
		cancel(nil)
	}
}

// cancelCaptures cancels every capture of sandbox id in progress (or waiting for its ID lock),
// and those that begin until the returned release is called, so a destroy does not wait for
// them.
func (m *Manager) cancelCaptures(id string) (release func()) {
	m.capMu.Lock()
	defer m.capMu.Unlock()
	if m.capDestroying == nil {
		m.capDestroying = map[string]int{}
	}
	m.capDestroying[id]++
	for c := range m.captures[id] {
		(*c)(destroyingErr(id))
	}
	return func() {
		m.capMu.Lock()
		defer m.capMu.Unlock()
		if m.capDestroying[id]--; m.capDestroying[id] <= 0 {
			delete(m.capDestroying, id)
		}
	}
}

func destroyingErr(id string) error {
	return errdefs.Newf(errdefs.CodeSandboxNotFound, "sandbox %q is being destroyed: its snapshot was cancelled", id).With("sandbox", id)
}

// DiskSpec is what a sandbox's disk is built on.
type DiskSpec struct {
	Image     string   // image ID
	ImageName string   // name shown in the sandbox's info
	Layers    []string // layer digests, newest first (at most MaxLayers)
	Snapshot  string   // the snapshot they came from
}

// ResetDisk rebuilds sandbox id's disk on spec: the sandbox is stopped if it runs (its
// processes get SIGTERM and the grace period; its unsaved state is lost), its upper directory
// (all its own changes) is discarded, its record gets spec's image and layers, and it is
// started again. Its settings, exposed ports and network slot stay. The old upper directory is
// first renamed aside, so a crash part way leaves either the old disk or an empty upper on the
// old layers, and the reset can be retried. Errors: SANDBOX_NOT_FOUND,
// SNAPSHOT_TOO_DEEP, the teardown's or start's error.
func (m *Manager) ResetDisk(ctx context.Context, sid sandboxid.ID, spec DiskSpec) (Info, error) {
	id := sid.String()
	if len(spec.Layers) > MaxLayers {
		return Info{}, errdefs.Newf(errdefs.CodeSnapshotTooDeep, "%d layers: a disk may have at most %d", len(spec.Layers), MaxLayers)
	}
	unlock := m.lock(id)
	defer unlock()
	rec, err := m.store.Get(ctx, id)
	if err != nil {
		return Info{}, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer cancel()
	if err := m.transition(ctx, id, StatusStopping, ""); err != nil {
		return Info{}, err
	}
	m.discardMemory(ctx, id) // the disk is about to change: its memory image is worthless
	if err := m.teardown(ctx, rec, false); err != nil {
		m.recordFailure(ctx, id, "reset disk: "+err.Error())
		return Info{}, err
	}
	if err := m.transition(ctx, id, StatusStopped, ""); err != nil {
		return Info{}, err
	}
	dir := m.sandboxDir(id)
	// A disk of its own is dropped whole; the next start makes a new, empty one.
	if err := m.diskOf(id).Remove(m.log); err != nil {
		return Info{}, fmt.Errorf("reset disk of %s: %w", id, err)
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	for _, d := range []string{"upper", "work"} {
		old := filepath.Join(dir, "."+d+"-old-"+hex.EncodeToString(suffix))
		if err := os.Rename(filepath.Join(dir, d), old); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Info{}, fmt.Errorf("reset disk of %s: %w", id, err)
		}
		defer os.RemoveAll(old)
	}
	if err := m.dropDirMounts(ctx, id); err != nil {
		return Info{}, err
	}
	if err := m.store.SetDisk(ctx, id, spec.Image, spec.ImageName, spec.Layers, spec.Snapshot); err != nil {
		return Info{}, err
	}
	m.log.InfoContext(ctx, "sandbox disk reset", "sandbox_id", id, "snapshot", spec.Snapshot, "layers", len(spec.Layers))
	if rec, err = m.store.Get(ctx, id); err != nil {
		return Info{}, err
	}
	if err := m.ensureLocked(ctx, rec, nil); err != nil {
		return Info{}, err
	}
	if rec, err = m.store.Get(ctx, id); err != nil {
		return Info{}, err
	}
	return m.info(rec), nil
}

// UsedLayers returns the layer digests some sandbox's disk is built on.
func (m *Manager) UsedLayers(ctx context.Context) (map[string]bool, error) {
	return m.store.UsedLayers(ctx)
}
