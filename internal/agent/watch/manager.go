package watch

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// Config configures a Manager.
type Config struct {
	// Roots are the directories watches may be on or below (after symlinks are resolved); nil
	// means DefaultRoots.
	Roots []string
	// MaxWatches bounds the Watchers running at once (each holds one inotify instance, a
	// per-user kernel resource); 0 means DefaultMaxWatches.
	MaxWatches int
	// MaxTracked bounds the paths the change journal tracks (each holds one inotify
	// instance); the least recently checked one is dropped for a new one. 0 means
	// DefaultMaxTracked.
	MaxTracked int
	// MaxDirs is the default Options.MaxDirs of watches and tracked paths; 0 means
	// DefaultMaxDirs.
	MaxDirs int
	// Settle is how long Check waits for events already queued in the kernel before it
	// answers "unchanged"; 0 means DefaultSettle.
	Settle time.Duration
	// Logger receives diagnostics; nil means slog.Default().
	Logger *slog.Logger
}

// Manager runs the watches and the change journal of one agent. It is safe for concurrent use.
type Manager struct {
	cfg  Config
	log  *slog.Logger
	boot string // random per Manager: versions of another agent boot are unknown

	mu       sync.Mutex
	closed   bool                // guarded by mu
	watches  map[string]*Watcher // ID → running watch (nil while it starts); guarded by mu
	tracked  map[string]*tracker // clean path → journal entry; guarded by mu
	trackSeq uint64              // last tracker ID; guarded by mu
}

// NewManager returns a Manager.
func NewManager(cfg Config) *Manager {
	if cfg.Roots == nil {
		cfg.Roots = DefaultRoots
	}
	if cfg.MaxWatches <= 0 {
		cfg.MaxWatches = DefaultMaxWatches
	}
	if cfg.MaxTracked <= 0 {
		cfg.MaxTracked = DefaultMaxTracked
	}
	if cfg.Settle <= 0 {
		cfg.Settle = DefaultSettle
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Manager{cfg: cfg, log: log, boot: randomHex(8), watches: map[string]*Watcher{}, tracked: map[string]*tracker{}}
}

// Watch starts watching the directory p (see Resolve) with opts and returns the Watcher once
// every watch is in place. opts.MaxDirs of 0 takes Config.MaxDirs.
//
// Errors: INVALID_PATH, FILE_NOT_FOUND, NOT_DIRECTORY, PERMISSION_DENIED (from Resolve);
// VALIDATION_FAILED or INVALID_PATTERN (context {field, pattern}) for bad globs;
// WATCH_LIMIT_EXCEEDED (context {limit: "watches"|"directories"|"inotify_watches"|
// "inotify_instances", max?}); UNAVAILABLE after Close.
func (m *Manager) Watch(p string, opts Options) (*Watcher, error) {
	if err := validatePatterns("include", opts.Include); err != nil {
		return nil, err
	}
	if err := validatePatterns("exclude", opts.Exclude); err != nil {
		return nil, err
	}
	clean, resolved, err := Resolve(p, m.cfg.Roots)
	if err != nil {
		return nil, err
	}
	if opts.MaxDirs <= 0 {
		opts.MaxDirs = m.cfg.MaxDirs
	}
	id := "watch_" + randomHex(6)
	m.mu.Lock()
	switch {
	case m.closed:
		m.mu.Unlock()
		return nil, errdefs.New(errdefs.CodeUnavailable, "the agent is shutting down")
	case len(m.watches) >= m.cfg.MaxWatches:
		m.mu.Unlock()
		return nil, limitError("watches", m.cfg.MaxWatches, "at most %d watches may run at once in a sandbox", m.cfg.MaxWatches)
	}
	m.watches[id] = nil // the slot is taken while the watches are set up
	m.mu.Unlock()
	release := func() {
		m.mu.Lock()
		delete(m.watches, id)
		m.mu.Unlock()
	}
	w, err := newWatcher(id, clean, resolved, opts, m.log, nil, release)
	if err != nil {
		release()
		return nil, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		w.stop("the agent is shutting down")
		return w, nil
	}
	m.watches[id] = w
	m.mu.Unlock()
	m.log.Debug("watch started", "watch", id, "path", clean, "dirs", w.Dirs())
	return w, nil
}

// Active returns how many watches are running.
func (m *Manager) Active() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.watches)
}

// Close stops every watch (each ends with a stopped event, reason "the agent is shutting
// down") and every tracked path; later Watch and Check calls fail with UNAVAILABLE.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	var ws []*Watcher
	for _, w := range m.watches {
		if w != nil {
			ws = append(ws, w)
		}
	}
	for k, t := range m.tracked {
		ws = append(ws, t.w)
		delete(m.tracked, k)
	}
	m.mu.Unlock()
	for _, w := range ws {
		w.stop("the agent is shutting down")
	}
}

// randomHex returns 2n random hex digits.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}
