package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/sandboxid"
	"github.com/hutchdev/hutch/internal/store"
)

// Sleep and wake.
//
// Activity on a running sandbox is: every API operation on it (Ensure), every preview request
// (Touch), a settings change (Update), and the start and end of every request held open
// through Hold (the API's forwarded operations, including streams such as exec and log
// streams and long waits, and preview requests, including WebSockets). A sandbox sleeps when it
// is running, not keepAlive, nothing holds it, and its last activity is at least its
// sleepAfter old.
//
// The idle reaper is one goroutine with a ticker (Config.IdleCheckInterval, 1 s): each tick it
// scans the running instances, all in memory (lastActive, sleepAfter and keepAlive are atomics
// of the instance, holds a map). One ticker rather than a timer per sandbox: no timer to re-arm
// on each of the many activity events of the hot path (a store of the time is all it costs),
// settings changes need no timer bookkeeping, and the scan of even thousands of instances once a
// second is negligible; the price is up to one interval of lateness.

// Sleep modes (Info.SleepMode): what a sleep keeps.
const (
	SleepModeDisk   = "disk"
	SleepModeMemory = "memory"
)

// sleepNote says why rec's sleep kept the disk only, for a sleep without a sleep record
// (memory.go): one that began before hutchd kept them.
func (m *Manager) sleepNote(rec store.Sandbox) string {
	rt, err := m.runtimeOf(rec)
	switch {
	case err != nil:
		return "runtime " + rec.Runtime + " is not available on this host"
	case !checkpointer(rt):
		return "runtime " + rt.Name() + " cannot checkpoint memory: processes were stopped and do not restart on wake (only the disk was kept)"
	default:
		return "this sleep kept the disk only: processes were stopped and do not restart on wake (only the disk was kept)"
	}
}

// checkpointer reports whether rt can save and restore a whole container (runtime.Checkpointer).
func checkpointer(rt runtime.Runtime) bool {
	_, ok := rt.(runtime.Checkpointer)
	return ok
}

// Limits of sleepAfter.
const (
	MinSleepAfter = time.Second
	MaxSleepAfter = 365 * 24 * time.Hour
)

// ValidateSleepAfter checks that d is within MinSleepAfter–MaxSleepAfter. Error:
// VALIDATION_FAILED.
func ValidateSleepAfter(d time.Duration) error {
	if d < MinSleepAfter || d > MaxSleepAfter {
		return outOfRange(d.String())
	}
	return nil
}

// outOfRange is the error for a sleepAfter outside MinSleepAfter–MaxSleepAfter; sent is the
// value as the client sent it, so the message names what was sent (not what a number far out
// of range would have become as a duration).
func outOfRange(sent string) error {
	return errdefs.Newf(errdefs.CodeInvalidArgument,
		"sleepAfter %s is outside %s-%s (to never sleep, set keepAlive)", sent, MinSleepAfter, FormatSleepAfter(MaxSleepAfter)).
		With("sleepAfter", sent)
}

// ParseSleepAfter parses a sleepAfter value: a Go duration ("10m", "30s", "1h30m") or a
// decimal number of seconds ("90", "1.5"), then validates it (ValidateSleepAfter). "0",
// "never" and the like are refused (keepAlive is the way to never sleep). Error:
// VALIDATION_FAILED.
func ParseSleepAfter(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	sent := s
	if secs, err := strconv.ParseFloat(s, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		sent = s + " (seconds)"
		// ErrRange: a number too big for a float64 (1e400), refused like any huge one.
		if err != nil || secs != secs || secs < 0 || secs > MaxSleepAfter.Seconds() { // NaN, negative, huge
			return 0, outOfRange(sent)
		}
		d = time.Duration(secs * float64(time.Second))
	} else if d, err = time.ParseDuration(s); err != nil {
		return 0, errdefs.Newf(errdefs.CodeInvalidArgument,
			"sleepAfter %q: want a duration such as \"10m\" or \"30s\", or a number of seconds", s).With("sleepAfter", s)
	}
	if d < MinSleepAfter || d > MaxSleepAfter {
		return 0, outOfRange(sent)
	}
	return d, nil
}

// FormatSleepAfter formats d as a Go duration without zero trailing units: "10m", "1h",
// "1h30m", "1.5s".
func FormatSleepAfter(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Hold marks sandbox id as in use until release is called: the idle reaper does not put it to
// sleep in between. Both the hold and its release count as activity. The API's forwarding
// handler and the preview proxy hold the sandbox for each request's whole duration, streamed
// replies and WebSockets included. Hold does not start the sandbox; take it before Ensure, so a
// sleep that has not begun yet cannot begin. release may be called more than once.
func (m *Manager) Hold(sid sandboxid.ID) (release func()) {
	id := sid.String()
	m.holdMu.Lock()
	m.holds[id]++
	m.holdMu.Unlock()
	m.Touch(sid)
	var once sync.Once
	return func() {
		once.Do(func() {
			m.holdMu.Lock()
			if m.holds[id]--; m.holds[id] <= 0 {
				delete(m.holds, id)
			}
			m.holdMu.Unlock()
			m.Touch(sid)
		})
	}
}

// UpdateOptions are the settings that can change on an existing sandbox; nil fields stay.
type UpdateOptions struct {
	// SleepAfter is MinSleepAfter–MaxSleepAfter.
	SleepAfter *time.Duration
	KeepAlive  *bool
	// SnapshotOnSleep: every sleep snapshots the sandbox's disk (Deps.SleepSnapshotter).
	SnapshotOnSleep *bool
}

// Update changes a sandbox's sleep settings and returns its info. It does not start a
// sleeping sandbox. On a running sandbox the change counts as activity, so the idle timer
// starts again from now (switching keepAlive off gives the sandbox a full sleepAfter).
// Errors: SANDBOX_NOT_FOUND, VALIDATION_FAILED.
func (m *Manager) Update(ctx context.Context, sid sandboxid.ID, opts UpdateOptions) (Info, error) {
	id := sid.String()
	if opts.SleepAfter != nil {
		if err := ValidateSleepAfter(*opts.SleepAfter); err != nil {
			return Info{}, err
		}
	}
	unlock := m.lock(id)
	defer unlock()
	rec, err := m.store.Get(ctx, id)
	if err != nil {
		return Info{}, err
	}
	if opts.SleepAfter != nil {
		rec.SleepAfter = *opts.SleepAfter
	}
	if opts.KeepAlive != nil {
		rec.KeepAlive = *opts.KeepAlive
	}
	if err := m.store.SetSleepSettings(ctx, id, rec.SleepAfter, rec.KeepAlive); err != nil {
		return Info{}, err
	}
	if opts.SnapshotOnSleep != nil {
		if err := m.store.SetSnapshotOnSleep(ctx, id, *opts.SnapshotOnSleep); err != nil {
			return Info{}, err
		}
		rec.SnapshotOnSleep = *opts.SnapshotOnSleep
	}
	m.mu.RLock()
	if inst := m.instances[id]; inst != nil {
		inst.setSleep(rec.SleepAfter, rec.KeepAlive)
		inst.touch()
	}
	m.mu.RUnlock()
	m.log.InfoContext(ctx, "sandbox sleep settings", "sandbox_id", id, "sleep_after", rec.SleepAfter, "keep_alive", rec.KeepAlive, "snapshot_on_sleep", rec.SnapshotOnSleep)
	m.auditSettings(ctx, rec)
	return m.info(rec), nil
}

// Sleep puts sandbox id to sleep now, whatever its activity and keepAlive: its processes are
// checkpointed with their memory where the runtime can (memory.go), else stopped (the agent
// saves its sessions); its file data flushed, its container and network torn down; its disk, settings and exposed ports remain, and the next operation on it wakes it.
// Requests in flight on it are cut. A sandbox that is not running (sleeping, stopped, error)
// is left as it is. Errors: SANDBOX_NOT_FOUND, or the teardown's failure
// (the sandbox is then recorded as error and the next request starts it again).
func (m *Manager) Sleep(ctx context.Context, sid sandboxid.ID) (Info, error) {
	id := sid.String()
	unlock := m.lock(id)
	defer unlock()
	rec, err := m.store.Get(ctx, id)
	if err != nil {
		return Info{}, err
	}
	m.mu.Lock()
	inst := m.instances[id]
	delete(m.instances, id)
	m.mu.Unlock()
	switch {
	case inst != nil:
	case slices.Contains([]Status{StatusRunning, StatusStopping, StatusStarting}, statusOf(rec)):
		// Recorded as up but not held here (a teardown that failed earlier): finish it.
	default:
		return m.info(rec), nil
	}
	if err := m.putToSleep(ctx, rec, inst, "requested"); err != nil {
		return Info{}, err
	}
	if rec, err = m.store.Get(ctx, id); err != nil {
		return Info{}, err
	}
	return m.info(rec), nil
}

// putToSleep records stopping, tears rec's sandbox down with a flush, and records sleeping.
// inst, already removed from m.instances (or nil), has its connections closed. The caller
// holds the ID lock.
func (m *Manager) putToSleep(ctx context.Context, rec store.Sandbox, inst *instance, reason string) error {
	// A sleep, once begun, finishes even if its caller goes away: a half torn-down sandbox
	// would only be finished by the next request.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	if inst != nil {
		inst.transport.CloseIdleConnections()
	}
	if err := m.transition(ctx, rec.ID, StatusStopping, ""); err != nil {
		return err
	}
	m.log.InfoContext(ctx, "sandbox going to sleep", "sandbox_id", rec.ID, "reason", reason)
	sr := m.checkpointForSleep(ctx, rec, inst)
	if err := m.teardown(ctx, rec, true); err != nil {
		m.log.ErrorContext(ctx, "sleep failed", "sandbox_id", rec.ID, "err", err)
		m.discardMemory(ctx, rec.ID)
		m.auditSleep(ctx, rec.ID, reason, "", err)
		m.recordFailure(ctx, rec.ID, "sleep: "+err.Error())
		return err
	}
	if err := m.writeSleepRecord(rec.ID, sr); err != nil {
		m.log.ErrorContext(ctx, "sleep record", "sandbox_id", rec.ID, "err", err)
		m.discardMemory(ctx, rec.ID) // without its record an image is never restored
		sr.Mode = SleepModeDisk
	}
	if err := m.transition(ctx, rec.ID, StatusSleeping, ""); err != nil {
		return err
	}
	m.log.InfoContext(ctx, "sandbox sleeping", "sandbox_id", rec.ID)
	m.auditSleep(ctx, rec.ID, reason, sr.Mode, nil)
	if rec.SnapshotOnSleep {
		m.snapshotAsleep(ctx, rec)
	}
	return nil
}

// SleepSnapshotter snapshots a sandbox that has just fallen asleep; internal/snapshot's
// Service implements it.
type SleepSnapshotter interface {
	// SnapshotAsleep snapshots the disk of the sleeping sandbox rec (its own changes, already
	// flushed, and its directory mounts: Disk) and returns the snapshot's ID. It is called
	// with the sandbox's ID lock held and its container gone: nothing writes to upper
	// meanwhile, and it must not call back into the Manager for this sandbox.
	SnapshotAsleep(ctx context.Context, rec store.Sandbox, disk Disk) (string, error)
	// SandboxDestroyed deletes the sleep snapshots of sandbox id, just destroyed (Destroy
	// calls it, without the ID lock).
	SandboxDestroyed(ctx context.Context, id string) error
}

// sleepSnapshotter is Deps.SleepSnapshotter's current answer; nil: not available.
func (m *Manager) sleepSnapshotter() SleepSnapshotter {
	if m.sleepSnap == nil {
		return nil
	}
	return m.sleepSnap()
}

// snapshotAsleep takes the sleep snapshot of rec's sandbox (asleep, ID lock held) and records
// its ID, or its failure: a failed snapshot never undoes the sleep.
func (m *Manager) snapshotAsleep(ctx context.Context, rec store.Sandbox) {
	ctx, done := m.cancellable(ctx, rec.ID) // a destroy cancels it
	defer done()
	start := time.Now()
	var id string
	var err error = errdefs.New(errdefs.CodeUnavailable, "snapshots are not available on this host")
	if s := m.sleepSnapshotter(); s != nil {
		var views map[string]string
		var release, releaseDisk func()
		if releaseDisk, err = m.holdDisk(ctx, rec.ID); err == nil {
			if views, release, err = m.dirMountViews(ctx, rec.ID); err == nil {
				id, err = s.SnapshotAsleep(ctx, rec, Disk{Upper: m.upperDir(rec.ID), Mounts: views})
				release()
			}
			releaseDisk()
		}
	}
	if err != nil {
		m.log.ErrorContext(ctx, "snapshot at sleep failed", "sandbox_id", rec.ID, "err", err)
		m.auditSleepSnapshot(ctx, rec.ID, "", err)
		if rerr := m.store.SetSleepSnapshot(ctx, rec.ID, "", err.Error()); rerr != nil {
			m.log.ErrorContext(ctx, "record failed snapshot at sleep", "sandbox_id", rec.ID, "err", rerr)
		}
		return
	}
	if err := m.store.SetSleepSnapshot(ctx, rec.ID, id, ""); err != nil {
		m.log.ErrorContext(ctx, "record snapshot at sleep", "sandbox_id", rec.ID, "snapshot", id, "err", err)
		return
	}
	m.log.InfoContext(ctx, "snapshot at sleep", "sandbox_id", rec.ID, "snapshot", id, "took", time.Since(start).Round(time.Millisecond))
	m.auditSleepSnapshot(ctx, rec.ID, id, nil)
}

// idleState is what the reaper decides on.
type idleState struct {
	lastActive time.Time
	sleepAfter time.Duration
	keepAlive  bool
	holds      int
}

// shouldSleep reports whether a running sandbox in state s is idle at now: not keepAlive, not
// held, and its last activity at least sleepAfter ago.
func shouldSleep(now time.Time, s idleState) bool {
	return !s.keepAlive && s.holds == 0 && s.sleepAfter > 0 && now.Sub(s.lastActive) >= s.sleepAfter
}

func (m *Manager) idleStateLocked(id string, inst *instance) idleState {
	return idleState{
		lastActive: time.Unix(0, inst.lastActive.Load()),
		sleepAfter: time.Duration(inst.sleepAfter.Load()),
		keepAlive:  inst.keepAlive.Load(),
		holds:      m.holds[id],
	}
}

// idleCandidates lists the running sandboxes that are idle at now and not already going to
// sleep.
func (m *Manager) idleCandidates(now time.Time) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	m.holdMu.Lock()
	defer m.holdMu.Unlock()
	var out []string
	for id, inst := range m.instances {
		if !m.sleeping[id] && shouldSleep(now, m.idleStateLocked(id, inst)) {
			out = append(out, id)
		}
	}
	return out
}

// reap is the idle reaper: each tick it starts a sleep for every idle sandbox.
func (m *Manager) reap() {
	defer m.bg.Done()
	t := time.NewTicker(m.cfg.IdleCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stopReaper:
			return
		case <-t.C:
		}
		for _, id := range m.idleCandidates(time.Now()) {
			m.holdMu.Lock()
			m.sleeping[id] = true
			m.holdMu.Unlock()
			m.bg.Add(1)
			go func() {
				defer m.bg.Done()
				m.sleepIfIdle(id)
				m.holdMu.Lock()
				delete(m.sleeping, id)
				m.holdMu.Unlock()
			}()
		}
	}
}

// sleepIfIdle puts id to sleep if it is still idle once its lock is held. The idleness check
// and the removal of the instance happen under mu and holdMu together, so a request that takes
// a hold afterwards finds no instance, queues on the ID lock and wakes the sandbox once it is
// asleep; one that held it before keeps it awake.
func (m *Manager) sleepIfIdle(id string) {
	// The reaper's own work has no caller whose context could end it, and a sleep once begun
	// must finish; Close waits for it instead.
	ctx := context.Background() //nolint:forbidigo // an idle timer's callback, without a ctx
	unlock := m.lock(id)
	defer unlock()
	rec, err := m.store.Get(ctx, id)
	if err != nil {
		m.log.WarnContext(ctx, "idle sleep: read record", "sandbox_id", id, "err", err)
		return
	}
	m.mu.Lock()
	m.holdMu.Lock()
	inst := m.instances[id]
	idle := inst != nil && shouldSleep(time.Now(), m.idleStateLocked(id, inst))
	if idle {
		delete(m.instances, id)
	}
	m.holdMu.Unlock()
	m.mu.Unlock()
	if !idle {
		return
	}
	if err := m.putToSleep(ctx, rec, inst, "idle for "+FormatSleepAfter(time.Duration(inst.sleepAfter.Load()))); err != nil {
		m.log.WarnContext(ctx, "idle sleep", "sandbox_id", id, "err", err) // the reaper has no caller to tell
	}
}

// syncDir flushes the file system that holds dir to disk (syncfs(2)). A missing dir is no
// error: there is nothing to flush.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return nil
}
