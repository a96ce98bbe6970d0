// Package session keeps the agent's shell sessions (a saved cwd and exported environment each)
// and runs commands in them: one `bash -c` per command, in its own process group, marked with
// an environment variable so its whole tree can be found and killed.
//
// To keep bash's start-up off the exec path, each session's next bash is started ahead of time
// ("warm shell", see warm.go): with the session's env and cwd, blocked reading its command from
// a pipe. At exec time the agent only writes the command (plus any per-command cwd, env and
// stdin) to it. Warm shells are kept for the maxWarm most recently used sessions and are
// killed when their session is deleted or the Manager is closed; one whose session state no
// longer matches is discarded and the command starts a bash itself, as it does when there is no
// warm shell.
//
// Concurrency: a Manager is safe for concurrent use. Commands of one session run one at a time
// (a per-session lock); different sessions run in parallel.
package session

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
	"sync/atomic"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// DefaultID is the session used when a request names none. It is created lazily and cannot
// be deleted.
const DefaultID = "default"

// maxIDLen is the longest session ID, in bytes.
const maxIDLen = 128

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Config configures a Manager.
type Config struct {
	// Workdir is the cwd of new sessions (absolute).
	Workdir string
	// Env is the sandbox environment ("KEY=value"), the base env of every new session.
	Env []string
	// StateDir is a private directory for per-command state files. It must exist.
	StateDir string
	// Shim is the argv prefix each shell is started under: hutch-init's `shim --fds 2 --`, a
	// child subreaper that keeps the command's whole tree below it (see reaper.Shim). nil
	// starts bash directly; the tree kill then relies on the process group and the marker.
	// For background commands the shim must report start success on reaper.StatusFDEnv.
	Shim []string
	// SaveFile is where Save writes the sessions and NewManager loads them from (see
	// persist.go); empty disables both. It should be on the sandbox's disk, not a tmpfs.
	SaveFile string
	// Logger receives diagnostics; nil means slog.Default().
	Logger *slog.Logger
}

// Manager holds the sessions of one agent.
type Manager struct {
	workdir  string
	baseEnv  map[string]string
	stateDir string
	shim     []string
	saveFile string
	log      *slog.Logger

	// def is the default session, created (and its shell warmed) at once, but listed only
	// once it is used.
	def    *Session
	useSeq atomic.Uint64  // orders sessions by last use
	closed atomic.Bool    // set by Close: no more warm shells
	warmWG sync.WaitGroup // warm shells being started
	stats  spawnStats

	mu       sync.Mutex
	sessions map[string]*Session // guarded by mu
}

// Session is one shell session. Its fields are guarded by its own locks; use the Manager's
// methods.
type Session struct {
	id string
	// run is a one-slot semaphore: holding it means running a command in this session.
	run chan struct{}

	mu      sync.Mutex
	cwd     string            // guarded by mu
	env     map[string]string // guarded by mu
	deleted bool              // guarded by mu
	// cancel stops the running command, nil when idle. Guarded by mu.
	cancel context.CancelCauseFunc
	// warm is the idle shell for the next command, nil when none. Guarded by mu.
	warm *shell
	// warming is closed when the shell being started for warm is ready; nil when none is
	// being started. Guarded by mu.
	warming chan struct{}
	// used is the Manager's useSeq at the last Create or Exec. Guarded by mu.
	used uint64
}

// Info describes a session.
type Info = agentapi.SessionInfo

// NewManager returns a Manager. cfg.Workdir and cfg.StateDir must be absolute. It restores the
// sessions saved in cfg.SaveFile, if any (see Save), and starts the default session's first
// shell in the background; Close kills it.
func NewManager(cfg Config) (*Manager, error) {
	if !filepath.IsAbs(cfg.Workdir) {
		return nil, fmt.Errorf("session: workdir %q is not absolute", cfg.Workdir)
	}
	if !filepath.IsAbs(cfg.StateDir) {
		return nil, fmt.Errorf("session: state dir %q is not absolute", cfg.StateDir)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	env := make(map[string]string, len(cfg.Env))
	for _, kv := range cfg.Env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" {
			env[k] = v
		}
	}
	delete(env, MarkerEnv)
	m := &Manager{
		workdir:  filepath.Clean(cfg.Workdir),
		baseEnv:  env,
		stateDir: cfg.StateDir,
		shim:     cfg.Shim,
		saveFile: cfg.SaveFile,
		log:      log,
		sessions: map[string]*Session{},
	}
	m.def = m.newSession(DefaultID, m.workdir)
	m.load()
	m.prewarm(m.def)
	return m, nil
}

// ValidateID checks a session ID: 1–128 characters of [A-Za-z0-9._-], starting with a letter
// or digit. It returns a VALIDATION_FAILED error otherwise.
func ValidateID(id string) error {
	if len(id) == 0 || len(id) > maxIDLen || !idPattern.MatchString(id) {
		return errdefs.Newf(errdefs.CodeInvalidArgument,
			"invalid session id %q: want 1-%d characters of [A-Za-z0-9._-] starting with a letter or digit",
			id, maxIDLen).With("sessionId", id)
	}
	return nil
}

// CreateOptions are the optional settings of a new session.
type CreateOptions struct {
	// ID of the session; empty means "session-<unix ms>".
	ID string
	// Env is added to the sandbox env.
	Env map[string]string
	// Cwd is the session's cwd; relative resolves against the workdir; empty means the workdir.
	Cwd string
}

// Create makes a new session. An existing ID gives SESSION_ALREADY_EXISTS; a bad ID gives
// VALIDATION_FAILED.
func (m *Manager) Create(opts CreateOptions) (Info, error) {
	id := opts.ID
	if id == "" {
		id = fmt.Sprintf("session-%d", time.Now().UnixMilli())
	}
	if err := ValidateID(id); err != nil {
		return Info{}, err
	}
	cwd := m.workdir
	if opts.Cwd != "" {
		cwd = m.resolve(m.workdir, opts.Cwd)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sessions[id]; ok {
		return Info{}, errdefs.Newf(errdefs.CodeSessionAlreadyExists, "session %q already exists", id).
			With("sessionId", id)
	}
	s := m.newSession(id, cwd)
	for k, v := range opts.Env {
		s.env[k] = v
	}
	s.used = m.useSeq.Add(1)
	m.sessions[id] = s
	m.prewarm(s)
	return Info{ID: id, Cwd: cwd}, nil
}

func (m *Manager) newSession(id, cwd string) *Session {
	return &Session{id: id, run: make(chan struct{}, 1), cwd: cwd, env: maps.Clone(m.baseEnv)}
}

// get returns the session id, creating it if it does not exist. An empty id means DefaultID.
func (m *Manager) get(id string) (*Session, error) {
	if id == "" {
		id = DefaultID
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.sessions[id]; ok {
		return s, nil
	}
	if id == DefaultID {
		m.sessions[id] = m.def
		return m.def, nil
	}
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	s := m.newSession(id, m.workdir)
	m.sessions[id] = s
	return s, nil
}

// Cwd returns the cwd of session id (created if unknown; empty means the default session).
func (m *Manager) Cwd(id string) (string, error) {
	s, err := m.get(id)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cwd, nil
}

// Snapshot returns the cwd and environment ("KEY=value", sorted) of session id (created if
// unknown; empty means the default session).
func (m *Manager) Snapshot(id string) (cwd string, env []string, err error) {
	s, err := m.get(id)
	if err != nil {
		return "", nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cwd, envList(s.env), nil
}

// Workdir returns the default cwd of new sessions.
func (m *Manager) Workdir() string { return m.workdir }

// List returns every session, sorted by ID.
func (m *Manager) List() []Info {
	m.mu.Lock()
	ss := slices.Collect(maps.Values(m.sessions))
	m.mu.Unlock()
	out := make([]Info, 0, len(ss))
	for _, s := range ss {
		s.mu.Lock()
		out = append(out, Info{ID: s.id, Cwd: s.cwd})
		s.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// errSessionDeleted is the cancel cause of a command whose session was deleted.
var errSessionDeleted = errdefs.New(errdefs.CodeSessionNotFound, "session deleted")

// Delete removes session id and kills its running command and its warm shell (the latter
// before it returns). Unknown → SESSION_NOT_FOUND;
// DefaultID → SESSION_DEFAULT_UNDELETABLE.
func (m *Manager) Delete(id string) error {
	if id == DefaultID || id == "" {
		return errdefs.New(errdefs.CodeSessionDefault, "the default session cannot be deleted").
			With("sessionId", DefaultID)
	}
	m.mu.Lock()
	s, ok := m.sessions[id]
	delete(m.sessions, id)
	m.mu.Unlock()
	if !ok {
		return errdefs.Newf(errdefs.CodeSessionNotFound, "session %q not found", id).With("sessionId", id)
	}
	s.mu.Lock()
	s.deleted = true
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel(errSessionDeleted)
	}
	m.dropWarm(s)
	return nil
}

// Close kills the running command and the warm shell of every session, and stops warming
// shells. The Manager stays usable; its commands then start their shell themselves.
func (m *Manager) Close() {
	m.closed.Store(true)
	// Shells being started see closed and discard themselves; wait for that, so nothing of
	// this Manager (processes, state files) outlives Close.
	m.warmWG.Wait()
	m.mu.Lock()
	ss := slices.Collect(maps.Values(m.sessions))
	if m.sessions[DefaultID] == nil {
		ss = append(ss, m.def)
	}
	m.mu.Unlock()
	for _, s := range ss {
		m.dropWarm(s)
	}
	for _, s := range ss {
		s.mu.Lock()
		cancel := s.cancel
		s.mu.Unlock()
		if cancel != nil {
			cancel(errdefs.New(errdefs.CodeUnavailable, "agent shutting down"))
		}
	}
}

// resolve makes p absolute against base and cleans it.
func (m *Manager) resolve(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// dirExists reports whether p is an existing directory.
// sessionCwd returns the directory a command of s that has no per-command cwd runs in: cwd (the
// session's saved cwd, read under s.mu), or, when that directory no longer exists (a tmpfs
// wiped by a sleep, a directory removed by another session), the workdir (or "/" when that is
// gone too), which then becomes s's cwd. warning is the line for the command's stderr in that
// case, "" otherwise.
func (m *Manager) sessionCwd(s *Session, cwd string) (dir, warning string) {
	if dirExists(cwd) {
		return cwd, ""
	}
	dir = m.workdir
	if !dirExists(dir) {
		dir = "/"
	}
	s.mu.Lock()
	if s.cwd == cwd {
		s.cwd = dir
	}
	s.mu.Unlock()
	m.log.Info("session cwd no longer exists", "session", s.id, "cwd", cwd, "now", dir)
	return dir, "hutch: session cwd " + cwd + " no longer exists; running in " + dir + "\n"
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
