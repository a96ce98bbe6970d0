// Package process keeps the agent's background processes: commands started in a session's
// state that run on their own (session.StartBackground), with an ID, a status, and their
// output held in bounded per-stream logs that can be read, followed live (resuming from byte
// offsets), and waited on (a log line, a port, the exit). Records of finished processes and
// their held logs are kept for a retention period, on disk when a directory is configured, so
// they survive an agent restart; records the agent finds "running" at start become "error".
//
// Concurrency: a Manager is safe for concurrent use.
package process

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/oom"
	"github.com/hutchdev/hutch/internal/agent/session"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// Log buffer sizes, in bytes per stream, and the default retention of finished processes.
const (
	DefaultLogBytes  = 4 << 20
	MinLogBytes      = 64 << 10
	MaxLogBytes      = 256 << 20
	DefaultRetention = time.Hour
)

// Status is a process's state.
type Status = agentapi.ProcessStatus

// Statuses. A process is StatusStarting only while it is being started.
const (
	StatusStarting  Status = "starting"
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed" // exit 0
	StatusFailed    Status = "failed"    // another exit code
	StatusKilled    Status = "killed"    // exit 137 or 143 (SIGKILL, SIGTERM)
	StatusError     Status = "error"     // could not start, or the agent died while it ran
)

// statusOf maps an exit code to a final status.
func statusOf(code int) Status {
	switch code {
	case 0:
		return StatusCompleted
	case 137, 143:
		return StatusKilled
	default:
		return StatusFailed
	}
}

// Info is a process record, as sent on the wire.
type Info = agentapi.ProcessInfo

// running reports whether the process has not ended.
func running(i Info) bool { return i.Status == StatusStarting || i.Status == StatusRunning }

// Config configures a Manager.
type Config struct {
	// Sessions runs the processes.
	Sessions *session.Manager
	// Dir keeps the records and held logs of processes (created with mode 0700); empty keeps
	// them in memory only.
	Dir string
	// LogBytes is the default log buffer per stream, MinLogBytes–MaxLogBytes; 0 means
	// DefaultLogBytes.
	LogBytes int
	// LogBudget bounds the bytes the log buffers of all processes hold in memory together
	// (see budget.go); 0 means DefaultLogBudget(CgroupRoot), 1/4 of the sandbox's memory
	// limit (none without a limit); negative means no budget.
	LogBudget int64
	// Retention is how long finished processes are kept; 0 means DefaultRetention.
	Retention time.Duration
	// Logger receives diagnostics; nil means slog.Default().
	Logger *slog.Logger
}

// Manager is the process table of one agent.
type Manager struct {
	sessions  *session.Manager
	dir       string
	logBytes  int
	budget    *budget // nil: no budget
	retention time.Duration
	log       *slog.Logger
	stopGC    chan struct{}
	gcDone    chan struct{}

	mu       sync.Mutex
	procs    map[string]*proc // guarded by mu
	seq      uint64           // start order; guarded by mu
	shutdown bool             // guarded by mu
}

// NewManager returns a Manager, loading the records kept in cfg.Dir (those left running
// become StatusError). It starts a goroutine that removes expired records; Shutdown stops it.
// Errors: a bad LogBytes, or a Dir that cannot be created or read.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Sessions == nil {
		return nil, errors.New("process: no session manager")
	}
	if cfg.LogBytes == 0 {
		cfg.LogBytes = DefaultLogBytes
	}
	if cfg.LogBytes < MinLogBytes || cfg.LogBytes > MaxLogBytes {
		return nil, fmt.Errorf("process: log buffer %d bytes outside %d-%d", cfg.LogBytes, MinLogBytes, MaxLogBytes)
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.LogBudget == 0 {
		cfg.LogBudget = DefaultLogBudget(CgroupRoot)
	}
	m := &Manager{
		sessions: cfg.Sessions, dir: cfg.Dir, logBytes: cfg.LogBytes, budget: newBudget(cfg.LogBudget),
		retention: cfg.Retention, log: log,
		stopGC: make(chan struct{}), gcDone: make(chan struct{}), procs: map[string]*proc{},
	}
	if m.dir != "" {
		if err := m.load(); err != nil {
			return nil, err
		}
	}
	go m.gcLoop()
	return m, nil
}

// maxIDLen is the longest process ID, in bytes.
const maxIDLen = 128

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`) // no leading dot: "." and ".." are path segments

// reservedIDs name endpoints next to /api/process/{id}.
var reservedIDs = map[string]bool{"kill-all": true, "list": true}

// ValidateID checks a process ID: 1–128 characters of [A-Za-z0-9_.-], not "kill-all" or
// "list". It returns a VALIDATION_FAILED error otherwise.
func ValidateID(id string) error {
	if len(id) == 0 || len(id) > maxIDLen || !idPattern.MatchString(id) || reservedIDs[id] {
		return errdefs.Newf(errdefs.CodeInvalidArgument,
			"invalid process id %q: want 1-%d characters of [A-Za-z0-9_.-] starting with a letter, digit or _, not kill-all or list", id, maxIDLen).
			With("processId", id)
	}
	return nil
}

// newID returns proc_<unix ms>_<6 random [a-z0-9]>.
func newID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [6]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return fmt.Sprintf("proc_%d_%s", time.Now().UnixMilli(), b[:])
}

// StartRequest is a process to start.
type StartRequest struct {
	// Command is a bash command line (INVALID_COMMAND when empty).
	Command string
	// ID of the process; empty means a generated proc_<unix ms>_<random>.
	ID string
	// SessionID is the session whose cwd and exported env the process starts with; empty
	// means the default session.
	SessionID string
	// Env and Cwd override the session's for this process only.
	Env map[string]string
	Cwd string
	// LogBytes is the log buffer per stream, MinLogBytes–MaxLogBytes; 0 means the Manager's
	// (lowered, down to MinLogBytes, to half the log budget when it is larger).
	LogBytes int
}

// Start starts a background process and returns its record. A process that bash could not
// be started for is recorded with StatusError (and returned without error).
//
// The log buffers take MinLogBytes per stream from the log budget at start and grow into it
// with the output (see budget.go).
//
// Errors: INVALID_COMMAND, VALIDATION_FAILED (ID, session ID, log buffer size; a LogBytes
// whose two streams exceed the whole log budget, or a log budget without MinLogBytes per
// stream left: context logBufferBytes, budgetBytes, availableBytes), PROCESS_ALREADY_EXISTS (an ID still in the table, running or retained), SESSION_NOT_FOUND
// (session deleted meanwhile), UNAVAILABLE (after Shutdown).
func (m *Manager) Start(req StartRequest) (_ Info, err error) {
	if strings.TrimSpace(req.Command) == "" {
		return Info{}, errdefs.New(errdefs.CodeInvalidCommand, "command is empty")
	}
	if req.ID == "" {
		req.ID = newID()
	} else if err := ValidateID(req.ID); err != nil {
		return Info{}, err
	}
	if req.LogBytes != 0 && (req.LogBytes < MinLogBytes || req.LogBytes > MaxLogBytes) {
		return Info{}, errdefs.Newf(errdefs.CodeInvalidArgument, "logBufferBytes %d outside %d-%d",
			req.LogBytes, MinLogBytes, MaxLogBytes).With("logBufferBytes", req.LogBytes)
	}
	if req.LogBytes, err = m.fitLogBytes(req.LogBytes); err != nil {
		return Info{}, err
	}
	if req.SessionID == "" {
		req.SessionID = session.DefaultID
	}
	if err := session.ValidateID(req.SessionID); err != nil {
		return Info{}, err
	}
	m.gc()
	m.mu.Lock()
	if m.shutdown {
		m.mu.Unlock()
		return Info{}, errdefs.New(errdefs.CodeUnavailable, "agent shutting down")
	}
	if _, ok := m.procs[req.ID]; ok {
		m.mu.Unlock()
		return Info{}, errdefs.Newf(errdefs.CodeProcessExists, "process %q already exists", req.ID).
			With("processId", req.ID)
	}
	if !m.budget.take(2 * MinLogBytes) {
		m.mu.Unlock()
		return Info{}, m.overBudget(req.LogBytes, "the agent's log budget is used up by other processes' logs")
	}
	m.seq++
	p := newProc(Info{
		ID: req.ID, Command: req.Command, Status: StatusStarting, StartTime: time.Now().UTC(),
		SessionID: req.SessionID, LogBufferBytes: req.LogBytes,
	}, req.LogBytes, m.seq)
	p.logs = [2]*ring{newChargedRing(req.LogBytes, m.budget, MinLogBytes), newChargedRing(req.LogBytes, m.budget, MinLogBytes)}
	m.procs[req.ID] = p
	m.mu.Unlock()

	oomWatch := oom.Default.Start()
	bg, err := m.sessions.StartBackground(req.SessionID,
		session.BackgroundRequest{Command: req.Command, Env: req.Env, Cwd: req.Cwd}, p.write)
	if err != nil && !errdefs.IsCode(err, errdefs.CodeStreamStartError) {
		m.mu.Lock()
		delete(m.procs, req.ID)
		m.mu.Unlock()
		p.free()
		close(p.started)
		close(p.done)
		return Info{}, err
	}
	if err != nil {
		m.log.Warn("background process could not start", "process", req.ID, "err", err)
		p.mu.Lock()
		p.info.Status, p.info.Error = StatusError, err.Error()
		end := time.Now().UTC()
		p.info.EndTime = &end
		info := p.info
		p.mu.Unlock()
		close(p.started)
		m.finish(p)
		return info, nil
	}
	p.mu.Lock()
	p.bg = bg
	p.info.PID, p.info.Cwd, p.info.Status = bg.PID(), bg.Cwd(), StatusRunning
	info := p.info
	p.mu.Unlock()
	m.persist(p, false)
	close(p.started)
	go func() {
		// Exits when the process has ended.
		code := bg.Wait()
		end := time.Now().UTC()
		reason := oomWatch.Reason(code)
		p.mu.Lock()
		p.info.ExitCode, p.info.EndTime, p.info.Status = &code, &end, statusOf(code)
		p.info.Reason = reason
		p.mu.Unlock()
		m.finish(p)
	}()
	return info, nil
}

// fitLogBytes returns the log buffer per stream for a request of n (0: the default): n when
// both streams fit the log budget; the default lowered to fit it.
func (m *Manager) fitLogBytes(n int) (int, error) {
	if m.budget == nil {
		return cmp.Or(n, m.logBytes), nil
	}
	most := int(min(m.budget.limit/2, MaxLogBytes))
	switch {
	case n == 0 && most >= MinLogBytes:
		return min(m.logBytes, most), nil
	case n == 0:
		return 0, m.overBudget(m.logBytes, "the agent's log budget is below two minimal buffers")
	case n > most:
		return 0, m.overBudget(n, "its two streams would exceed the agent's whole log budget")
	}
	return n, nil
}

// overBudget is the VALIDATION_FAILED error of a start whose log buffers do not fit.
func (m *Manager) overBudget(n int, why string) error {
	return errdefs.Newf(errdefs.CodeInvalidArgument,
		"logBufferBytes %d does not fit: %s (log budget %d bytes, %d available)",
		n, why, m.budget.limit, m.budget.available()).
		With("logBufferBytes", n).With("budgetBytes", m.budget.limit).With("availableBytes", m.budget.available())
}

// finish persists an ended process (record and held logs) and marks it done.
func (m *Manager) finish(p *proc) {
	m.persist(p, true)
	p.mu.Lock()
	close(p.done)
	p.notify()
	p.mu.Unlock()
}

// lookup returns process id, or PROCESS_NOT_FOUND.
func (m *Manager) lookup(id string) (*proc, error) {
	m.gc()
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.procs[id]
	if !ok {
		return nil, errdefs.Newf(errdefs.CodeProcessNotFound, "process %q not found", id).With("processId", id)
	}
	return p, nil
}

// Get returns the record of process id. Errors: PROCESS_NOT_FOUND.
func (m *Manager) Get(id string) (Info, error) {
	p, err := m.lookup(id)
	if err != nil {
		return Info{}, err
	}
	return p.snapshot(), nil
}

// List returns the records in start order, only those with the given status when status is
// not empty ("running" also lists processes still starting).
func (m *Manager) List(status Status) []Info {
	m.gc()
	m.mu.Lock()
	ps := slices.Collect(maps.Values(m.procs))
	m.mu.Unlock()
	slices.SortFunc(ps, func(a, b *proc) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]Info, 0, len(ps))
	for _, p := range ps {
		info := p.snapshot()
		if status == "" || info.Status == status || (status == StatusRunning && info.Status == StatusStarting) {
			out = append(out, info)
		}
	}
	return out
}

// Kill ends process id's whole tree (session.Background.Terminate: SIGTERM, up to grace, then
// SIGKILL) and returns once it has ended and its record is saved. killed is false when it had
// ended already. Errors: PROCESS_NOT_FOUND.
func (m *Manager) Kill(id string, grace time.Duration) (killed bool, info Info, err error) {
	p, err := m.lookup(id)
	if err != nil {
		return false, Info{}, err
	}
	killed = p.kill(grace)
	return killed, p.snapshot(), nil
}

// KillAll kills every running process, in parallel, as Kill does, and returns how many it
// killed.
func (m *Manager) KillAll(grace time.Duration) int {
	m.mu.Lock()
	ps := slices.Collect(maps.Values(m.procs))
	m.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for _, p := range ps {
		wg.Go(func() {
			if p.kill(grace) {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return n
}

// Shutdown refuses new processes, kills the running ones (as KillAll) and saves their final
// records, and stops removing expired records. It is idempotent.
func (m *Manager) Shutdown(grace time.Duration) {
	m.mu.Lock()
	first := !m.shutdown
	m.shutdown = true
	m.mu.Unlock()
	if first {
		close(m.stopGC)
		<-m.gcDone
	}
	m.KillAll(grace)
}
