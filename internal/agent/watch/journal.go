package watch

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/files"
)

// Journal defaults.
const (
	// DefaultMaxTracked is how many paths the change journal tracks at once.
	DefaultMaxTracked = 8
	// DefaultSettle is how long Check waits for in-flight events before "unchanged".
	DefaultSettle = 20 * time.Millisecond
)

// Change statuses.
const (
	StatusChanged   = "changed"
	StatusUnchanged = "unchanged"
	StatusResync    = "resync"
)

// Change is the answer of Check: Status (changed, unchanged or resync) and the Version to
// pass as since next time.
type Change struct {
	Status  string
	Version string
}

// tracker is the journal entry of one path: a recursive watch (default excludes) that counts
// changes.
type tracker struct {
	id   uint64
	w    *Watcher
	seq  atomic.Uint64 // changes seen
	used time.Time     // last Check; guarded by Manager.mu
}

// dead reports whether the tracker's watch has ended (its directory was deleted or moved).
func (t *tracker) dead() bool {
	select {
	case <-t.w.done:
		return true
	default:
		return false
	}
}

// version formats the version of t at seq: "v1.<boot>.<tracker>.<seq>".
func (m *Manager) version(t *tracker, seq uint64) string {
	return fmt.Sprintf("v1.%s.%d.%d", m.boot, t.id, seq)
}

// parseVersion returns the tracker and sequence of a version of this Manager; ok is false
// for anything else (empty, malformed, another agent boot).
func (m *Manager) parseVersion(v string) (tid, seq uint64, ok bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 4 || parts[0] != "v1" || parts[1] != m.boot {
		return 0, 0, false
	}
	tid, err1 := strconv.ParseUint(parts[2], 10, 64)
	seq, err2 := strconv.ParseUint(parts[3], 10, 64)
	return tid, seq, err1 == nil && err2 == nil
}

// Check answers whether anything below the directory p changed since the version since
// (from an earlier Check of the same path):
//   - the first Check of a path starts tracking it (a recursive watch, default excludes) and
//     answers resync: the caller has no baseline to compare with, so it reads the whole
//     state and keeps the version;
//   - then: changed (something was created, modified, deleted, moved or had its attributes
//     changed since that version, or events were lost) or unchanged, with the current version;
//   - resync for an empty, malformed or unknown since (another path, another agent boot, a
//     tracking dropped for a newer path beyond Config.MaxTracked).
//
// When the directory is deleted or moved away its tracking ends: the next Check answers
// changed (or resync) and the one after starts over (FILE_NOT_FOUND while it is missing).
// Errors: those of Resolve; WATCH_LIMIT_EXCEEDED (the kernel's inotify limits, or a tree over
// Config.MaxDirs directories); UNAVAILABLE after Close.
func (m *Manager) Check(p, since string) (Change, error) {
	if err := files.CheckPath(p); err != nil {
		return Change{}, err
	}
	if !filepath.IsAbs(p) {
		return Change{}, errdefs.Newf(errdefs.CodeInvalidPath, "path %q is not absolute", p).With("path", p)
	}
	clean := filepath.Clean(p)
	tid, seq, known := m.parseVersion(since)

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Change{}, errdefs.New(errdefs.CodeUnavailable, "the agent is shutting down")
	}
	t := m.tracked[clean]
	if t != nil && t.dead() {
		delete(m.tracked, clean)
		if final := t.seq.Load(); known && tid == t.id && seq < final {
			m.mu.Unlock()
			return Change{Status: StatusChanged, Version: m.version(t, final)}, nil
		}
		t = nil
	}
	if t != nil {
		t.used = time.Now()
		m.mu.Unlock()
		return m.compare(t, tid, seq, known), nil
	}
	defer m.mu.Unlock()
	t, err := m.track(clean)
	if err != nil {
		return Change{}, err
	}
	return Change{Status: StatusResync, Version: m.version(t, t.seq.Load())}, nil
}

// compare answers a Check of a tracked path. Events of changes made before this call are in
// the kernel's queue already: the watch gets Config.Settle to read them first, so that the
// answer and its version cover every change made before the call.
func (m *Manager) compare(t *tracker, tid, seq uint64, known bool) Change {
	time.Sleep(m.cfg.Settle)
	cur := t.seq.Load()
	switch {
	case !known || tid != t.id || seq > cur:
		return Change{Status: StatusResync, Version: m.version(t, cur)}
	case seq < cur:
		return Change{Status: StatusChanged, Version: m.version(t, cur)}
	}
	return Change{Status: StatusUnchanged, Version: m.version(t, cur)}
}

// track starts tracking clean, dropping the least recently checked path when the journal is
// full. Called with m.mu held.
func (m *Manager) track(clean string) (*tracker, error) {
	_, resolved, err := Resolve(clean, m.cfg.Roots)
	if err != nil {
		return nil, err
	}
	if len(m.tracked) >= m.cfg.MaxTracked {
		var oldest string
		for k, o := range m.tracked {
			if oldest == "" || o.used.Before(m.tracked[oldest].used) {
				oldest = k
			}
		}
		o := m.tracked[oldest]
		delete(m.tracked, oldest)
		o.w.stop("dropped from the change journal")
	}
	m.trackSeq++
	t := &tracker{id: m.trackSeq, used: time.Now()}
	opts := Defaults()
	opts.MaxDirs = m.cfg.MaxDirs
	w, err := newWatcher(fmt.Sprintf("journal_%d", t.id), clean, resolved, opts, m.log, func() { t.seq.Add(1) }, func() {})
	if err != nil {
		return nil, err
	}
	t.w = w
	m.tracked[clean] = t
	return t, nil
}

// Tracked returns how many paths the change journal tracks.
func (m *Manager) Tracked() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.tracked)
}
