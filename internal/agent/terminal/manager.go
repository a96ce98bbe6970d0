// Package terminal keeps the agent's interactive terminals: one shell per terminal on its own
// pseudo-terminal (creack/pty), started in a session's cwd and environment, whose output is
// kept in a ring buffer (replayed to every viewer that attaches) and fanned out live to any
// number of viewers. A terminal outlives its viewers; it ends when its shell exits or it is
// killed, and its exit code is kept until it is removed or replaced.
//
// Flow control: the output reader never gets more than the ring's size ahead of an attached
// viewer. A viewer that makes no progress for a while (Config.SlowViewer) while the reader waits for it is
// dropped (its Read returns ErrTooSlow; Config.SlowViewer, default DefaultSlowViewer) and the shell goes on; with no viewer the ring simply
// keeps the newest bytes.
//
// Concurrency: a Manager, its terminals and viewers are safe for concurrent use.
package terminal

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/session"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// Defaults and limits.
const (
	DefaultBufferBytes  = 1 << 20   // ring buffer per terminal
	MinBufferBytes      = 256 << 10 // smallest ring allowed
	MaxBufferBytes      = 64 << 20
	DefaultKillGrace    = 2 * time.Second // SIGHUP → SIGKILL
	DefaultMaxTerminals = 32
	DefaultCols         = 80
	DefaultRows         = 24
	MaxSize             = 1000 // most columns or rows
	DefaultShell        = "/bin/bash"
	// DefaultSlowViewer is how long the output reader waits for a viewer that makes no
	// progress before it drops that viewer.
	DefaultSlowViewer = 10 * time.Second
)

var idPattern = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// Config configures a Manager.
type Config struct {
	// Sessions gives each terminal the cwd and environment of its session.
	Sessions *session.Manager
	// Shim is the argv prefix the shell is started under (hutch-init's `shim --`, which makes
	// it a child subreaper, nice 19 and OOM-preferred like other commands); nil starts the
	// shell directly. It must pass no extra fds.
	Shim []string
	// BufferBytes is the output ring per terminal, MinBufferBytes–MaxBufferBytes; 0 means
	// DefaultBufferBytes.
	BufferBytes int
	// KillGrace is the wait between SIGHUP and SIGKILL when a terminal is killed or its shell
	// exits with processes left in its session; 0 means DefaultKillGrace.
	KillGrace time.Duration
	// MaxTerminals bounds the terminals kept at once (exited ones included; the oldest exited
	// one is dropped to make room); 0 means DefaultMaxTerminals.
	MaxTerminals int
	// SlowViewer is how long the output reader waits for an attached viewer that reads nothing
	// before it drops that viewer; 0 means DefaultSlowViewer.
	SlowViewer time.Duration
	// Logger receives diagnostics; nil means slog.Default().
	Logger *slog.Logger
}

// Manager holds the terminals of one agent.
type Manager struct {
	sessions *session.Manager
	shim     []string
	bufBytes int
	grace    time.Duration
	slow     time.Duration
	max      int
	log      *slog.Logger

	mu     sync.Mutex
	terms  map[string]*Terminal // guarded by mu
	closed bool                 // guarded by mu
}

// NewManager returns a Manager. Errors: no Sessions, or BufferBytes out of range.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Sessions == nil {
		return nil, fmt.Errorf("terminal: no session manager")
	}
	if cfg.BufferBytes == 0 {
		cfg.BufferBytes = DefaultBufferBytes
	}
	if cfg.BufferBytes < MinBufferBytes || cfg.BufferBytes > MaxBufferBytes {
		return nil, fmt.Errorf("terminal: buffer %d bytes outside %d-%d", cfg.BufferBytes, MinBufferBytes, MaxBufferBytes)
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.SlowViewer <= 0 {
		cfg.SlowViewer = DefaultSlowViewer
	}
	if cfg.MaxTerminals <= 0 {
		cfg.MaxTerminals = DefaultMaxTerminals
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Manager{sessions: cfg.Sessions, shim: slices.Clone(cfg.Shim), bufBytes: cfg.BufferBytes,
		grace: cfg.KillGrace, slow: cfg.SlowViewer, max: cfg.MaxTerminals, log: log, terms: map[string]*Terminal{}}, nil
}

// Options are the settings of a terminal created by Attach. They are ignored when the
// terminal already runs.
type Options struct {
	// Session whose cwd and exported environment the shell starts with; empty means the
	// default session (an unknown one is created, as by exec).
	Session string
	// Cols and Rows are the initial size, 1–MaxSize; 0 means DefaultCols×DefaultRows.
	Cols, Rows int
	// Shell is the absolute path of an executable; empty means DefaultShell.
	Shell string
}

// Info describes a terminal, as sent on the wire.
type Info = agentapi.TerminalInfo

// ValidateID checks a terminal ID: 1–64 characters of [a-z0-9_-]. VALIDATION_FAILED otherwise.
func ValidateID(id string) error {
	if !idPattern.MatchString(id) {
		return errdefs.Newf(errdefs.CodeInvalidArgument, "invalid terminal id %q: want 1-64 characters of [a-z0-9_-]", id).
			With("terminalId", id)
	}
	return nil
}

// ValidateSize checks a terminal size: 1–MaxSize columns and rows. VALIDATION_FAILED otherwise.
func ValidateSize(cols, rows int) error {
	if cols < 1 || cols > MaxSize || rows < 1 || rows > MaxSize {
		return errdefs.Newf(errdefs.CodeInvalidArgument, "terminal size %dx%d: want 1-%d columns and rows", cols, rows, MaxSize).
			With("cols", cols).With("rows", rows)
	}
	return nil
}

// normalize fills defaults into o and checks it.
func (o *Options) normalize() error {
	if o.Cols == 0 && o.Rows == 0 {
		o.Cols, o.Rows = DefaultCols, DefaultRows
	}
	if err := ValidateSize(o.Cols, o.Rows); err != nil {
		return err
	}
	if o.Session != "" {
		if err := session.ValidateID(o.Session); err != nil {
			return err
		}
	}
	if o.Shell == "" {
		o.Shell = DefaultShell
	}
	if !filepath.IsAbs(o.Shell) {
		return errdefs.Newf(errdefs.CodeInvalidCommand, "shell %q: want an absolute path", o.Shell).With("shell", o.Shell)
	}
	fi, err := os.Stat(o.Shell)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return errdefs.Newf(errdefs.CodeInvalidCommand, "shell %q is not an executable file", o.Shell).With("shell", o.Shell)
	}
	// The agent's own binary as a "shell" would start a second agent, which takes over the
	// sandbox's process records.
	if self, err := os.Stat("/proc/self/exe"); err == nil && os.SameFile(fi, self) {
		return errdefs.Newf(errdefs.CodeInvalidCommand, "shell %q is the sandbox's agent, not a shell", o.Shell).With("shell", o.Shell)
	}
	return nil
}

// Attach returns a new viewer of terminal id, starting the terminal with opts when it does not
// exist or its shell has exited (an exited terminal is replaced by a fresh one). The viewer
// first reads the ring buffer's content (Ready().ReplayBytes bytes), then live output.
// Errors: VALIDATION_FAILED (id, size, session), INVALID_COMMAND (shell), RESOURCE_BUSY when
// MaxTerminals terminals run, UNAVAILABLE after Close, COMMAND_EXECUTION_ERROR when the shell
// cannot start.
func (m *Manager) Attach(id string, opts Options) (*Viewer, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errdefs.New(errdefs.CodeUnavailable, "agent shutting down")
	}
	if t := m.terms[id]; t != nil {
		if v := t.attach(); v != nil {
			return v, nil
		}
		delete(m.terms, id) // exited: replaced below
	}
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	if len(m.terms) >= m.max && !m.evictExited() {
		return nil, errdefs.Newf(errdefs.CodeResourceBusy, "%d terminals are running, the most a sandbox keeps; kill one first", len(m.terms)).
			With("maxTerminals", m.max)
	}
	t, err := m.start(id, opts)
	if err != nil {
		return nil, err
	}
	m.terms[id] = t
	return t.attach(), nil
}

// evictExited removes the exited terminal that was created first; false if none has exited.
// m.mu is held.
func (m *Manager) evictExited() bool {
	var oldest *Terminal
	for _, t := range m.terms {
		if t.hasExited() && (oldest == nil || t.created.Before(oldest.created)) {
			oldest = t
		}
	}
	if oldest == nil {
		return false
	}
	delete(m.terms, oldest.id)
	return true
}

// List returns every terminal, sorted by ID.
func (m *Manager) List() []Info {
	m.mu.Lock()
	ts := slices.Collect(maps.Values(m.terms))
	m.mu.Unlock()
	out := make([]Info, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Info())
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Get returns terminal id's record. Unknown → TERMINAL_NOT_FOUND.
func (m *Manager) Get(id string) (Info, error) {
	m.mu.Lock()
	t := m.terms[id]
	m.mu.Unlock()
	if t == nil {
		return Info{}, notFound(id)
	}
	return t.Info(), nil
}

// Kill ends terminal id and removes it: SIGHUP to its shell's session and process tree, SIGKILL
// to what is left after the grace period. It returns the final record once the shell has been
// reaped (or ctx ends). Viewers get the exit. Unknown → TERMINAL_NOT_FOUND.
func (m *Manager) Kill(ctx context.Context, id string) (Info, error) {
	m.mu.Lock()
	t := m.terms[id]
	m.mu.Unlock()
	if t == nil {
		return Info{}, notFound(id)
	}
	t.kill(ctx)
	m.mu.Lock()
	if m.terms[id] == t {
		delete(m.terms, id)
	}
	m.mu.Unlock()
	return t.Info(), nil
}

// Close kills every terminal (as Kill, in parallel) and refuses new ones.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	ts := slices.Collect(maps.Values(m.terms))
	m.terms = map[string]*Terminal{}
	m.mu.Unlock()
	// Bounded: a shutdown (the sandbox going to sleep) must go on to stop the processes.
	ctx, cancel := context.WithTimeout(context.Background(), 2*m.grace+2*drainWait) //nolint:forbidigo // Close has no ctx; the bound keeps the shutdown going
	defer cancel()
	var wg sync.WaitGroup
	for _, t := range ts {
		wg.Go(func() { t.kill(ctx) })
	}
	wg.Wait()
}

func notFound(id string) error {
	return errdefs.Newf(errdefs.CodeTerminalNotFound, "terminal %q not found", id).With("terminalId", id)
}
