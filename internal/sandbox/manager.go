// Package sandbox is hutchd's sandbox manager: it maps a sandbox ID to its record in the store
// and its running instance, and drives the lifecycle (creating → running → stopping →
// sleeping or stopped → starting → running …, destroyed) over the image store, the overlay root filesystem, the network namespace, the
// egress service and the container runtime. It owns every long-lived resource of a sandbox; an
// API request only borrows them.
//
// Concurrency: lifecycle operations on one ID are serialised by a per-ID lock, so many
// concurrent get-or-create calls for one new ID create exactly one sandbox. Operations on
// different IDs run in parallel. The running fast path (Ensure on a running sandbox) takes only
// a read lock.
//
// IDs: the exported methods take a sandboxid.ID, which callers get from sandboxid.Parse (the
// API edge, or a checked conversion of an ID read back); the Manager does not check it again.
// The layers that build paths and names from an ID re-check it with sandboxid.CheckName.
//
// Crash safety: the store is written before and after each step, and Recover (run once at
// start) reconciles the store with what the kernel and the runtime really hold: running
// sandboxes whose agent answers are re-adopted; everything else (containers, mounts, network
// namespaces, veths) is torn down and the record marked stopped (or sleeping, for a sleep or
// wake that was cut short).
//
// Sleep (sleep.go): an idle reaper owned by the Manager puts running sandboxes to sleep when
// they have had no activity for their sleepAfter and nothing holds them (Hold).
package sandbox

import (
	"context"
	"fmt"
	"golang.org/x/sys/unix"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agentclient"
	"github.com/hutchdev/hutch/internal/envlimit"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/sandboxid"
	"github.com/hutchdev/hutch/internal/store"
)

// Image is a resolved base image.
type Image struct {
	ID     string
	Name   string
	RootFS string // host path of the read-only root filesystem
}

// Images resolves an image name ("default") or ID, building the default image on first need.
// Progress lines of a build go to progress.
type Images interface {
	Resolve(ctx context.Context, name string, progress io.Writer) (Image, error)
}

// Net is a sandbox's network attachment.
type Net struct {
	NSPath  string
	HostIf  string
	Gateway netip.Addr
	Addr    netip.Addr
}

// Networks creates and removes per-sandbox network namespaces.
type Networks interface {
	Setup(ctx context.Context, id string, slot int) (Net, error)
	Teardown(ctx context.Context, id string, slot int) error
	// Sweep removes every namespace and host link of ours that does not belong to a sandbox
	// in keep (sandbox ID → network slot), for crash cleanup.
	Sweep(ctx context.Context, keep map[string]int) error
}

// Egress registers sandboxes with the egress path (DNS, proxy, firewall).
type Egress interface {
	AddSandbox(ctx context.Context, id string, n Net) error
	RemoveSandbox(ctx context.Context, id string) error
}

// RootFS mounts and unmounts overlay root filesystems.
type RootFS interface {
	Mount(lower, upper, work, merged string) error
	Unmount(merged string) error
	// Mounted lists mount points under prefix.
	Mounted(prefix string) ([]string, error)
}

// Config is the manager's configuration.
type Config struct {
	// StateDir holds the agent binary copy and the agents' sockets.
	StateDir string
	// DataDir holds sandboxes/<id>/{disk.img,disk/{upper,work,mounts},rootfs,etc}: the
	// sandboxes' disks (the data volume's mountpoint, see internal/volume; disk.go for disks
	// without an image). Default StateDir.
	DataDir string
	// AgentBinary is the host path of the static hutch-init binary.
	AgentBinary string
	// ExtraCACerts are PEM files appended to the sandbox's CA bundle (an operator's proxy CA).
	ExtraCACerts []string
	// StopGrace is how long PID 1 gets after SIGTERM before SIGKILL.
	StopGrace time.Duration
	// AgentTimeout bounds the wait for a new sandbox's agent to answer.
	AgentTimeout time.Duration
	// ProcessLogBytes and ProcessRetention configure the agent's background processes (per
	// stream log buffer in bytes; how long finished ones are kept). Zero: the agent's defaults.
	ProcessLogBytes  int
	ProcessRetention time.Duration
	// DiskQuota gives each new sandbox a disk of its own with its instance type's DiskBytes
	// (disk.go). Off: new sandboxes' disks are directories on the data volume, unlimited.
	DiskQuota bool
	// NoSleepMemory makes every sleep a disk sleep, even where the runtime can checkpoint
	// (memory.go).
	NoSleepMemory bool
	// UserNS gives each new runc sandbox a user namespace with an ID range of its own
	// (userns.go); sandboxes keep what they were created with.
	UserNS bool
	// IdleCheckInterval is how often the idle reaper looks for sandboxes to put to sleep; 0
	// means 1 s. A sandbox sleeps at most this long after its sleepAfter has passed.
	IdleCheckInterval time.Duration
	// MaxFrozen is the longest a capture (Capture) keeps a running sandbox frozen; 0 means
	// DefaultMaxFrozen.
	MaxFrozen time.Duration
}

// Deps are what the Manager works through. Store is required; each other nil field disables
// what needs it (documented on the field), which tests that start no sandbox rely on.
type Deps struct {
	Store *store.Store
	// Runtime is the default backend (more with AddRuntime); nil only in tests that start no
	// sandbox.
	Runtime  runtime.Runtime
	Images   Images
	Networks Networks
	Egress   Egress
	RootFS   RootFS
	// Layers resolves snapshot layers (snapshot.go); nil: sandboxes built on snapshot layers
	// cannot start.
	Layers LayerSource
	// Trees gives the backup trees of directory mounts (dirmount.go); nil: sandboxes with
	// directory mounts cannot start.
	Trees TreeSource
	// EgressCredentials gives starting sandboxes their egress CA and placeholders
	// (egresscreds.go); nil: none.
	EgressCredentials EgressCredentials
	// Auditor records lifecycle decisions (audit.go); nil: nothing is recorded.
	Auditor Auditor
	// SleepSnapshotter returns what snapshots sandboxes with snapshotOnSleep as they fall
	// asleep, and deletes a destroyed sandbox's sleep snapshots (sleep.go). It is a func
	// because internal/snapshot's Service is built on the Manager: it is called at each use,
	// and nil (the field, or its result) means snapshots are not available: such sleeps record
	// a snapshot error.
	SleepSnapshotter func() SleepSnapshotter
}

// Manager owns every sandbox of this host.
type Manager struct {
	cfg    Config
	log    *slog.Logger
	store  *store.Store
	rt     runtime.Runtime
	images Images
	nets   Networks
	egress Egress
	rootfs RootFS
	// layers, trees, egressCreds, auditor and sleepSnap are the Deps of the same names; each
	// may be nil (see Deps).
	layers      LayerSource
	trees       TreeSource
	egressCreds EgressCredentials
	auditor     Auditor
	sleepSnap   func() SleepSnapshotter

	// runtimes are the backends by name (runtimes.go), unavailable the known ones this host
	// cannot run and why; defaultRuntime is the runtime of sandboxes created without one.
	// Set before serving, read-only after.
	runtimes       map[string]runtime.Runtime
	unavailable    map[string]error
	defaultRuntime string

	agentPath string   // content-addressed copy of AgentBinary under StateDir
	agentsDir *os.File // <StateDir>/agents, opened O_PATH: agent sockets live here

	locksMu sync.Mutex
	locks   map[string]*idLock // guarded by locksMu

	// captures are the cancels of the snapshots of each sandbox in progress (snapshot.go), for
	// Destroy; guarded by capMu.
	capMu         sync.Mutex
	captures      map[string]map[*context.CancelCauseFunc]bool
	capDestroying map[string]int // destroys in progress, by sandbox ID

	mu        sync.RWMutex
	instances map[string]*instance // running sandboxes; guarded by mu
	// destroying: sandboxes whose Destroy is under way (Gone); guarded by mu.
	destroying map[string]bool

	// Lock order: mu before holdMu; never the reverse.
	holdMu   sync.Mutex
	holds    map[string]int  // sandbox ID → requests in flight (Hold); guarded by holdMu
	sleeping map[string]bool // idle sleeps in progress; guarded by holdMu

	stopReaper chan struct{}  // closed by Close
	bg         sync.WaitGroup // the reaper and the idle sleeps it started
	closeOnce  sync.Once
}

// instance is a running sandbox.
type instance struct {
	pid       int
	net       Net
	transport *http.Transport
	agent     *agentclient.Client // over transport
	// lastActive is the Unix time in nanoseconds of the last activity: an operation through
	// Ensure (every API call on the sandbox), a preview request (Touch), the start or end of a
	// held request (Hold), a settings change, or the start.
	lastActive atomic.Int64
	// sleepAfter (nanoseconds) and keepAlive mirror the record, so the reaper reads no store.
	sleepAfter atomic.Int64
	keepAlive  atomic.Bool
	// agentBin is the host path of the hutch-init binary it runs ("" when unknown): a memory
	// sleep's restore needs the same one (memory.go).
	agentBin string
}

// newInstance returns a running sandbox's instance, active now, with rec's sleep settings.
func newInstance(pid int, n Net, tr *http.Transport, rec store.Sandbox) *instance {
	inst := &instance{pid: pid, net: n, transport: tr, agent: agentclient.New(rec.ID, tr)}
	inst.lastActive.Store(time.Now().UnixNano())
	inst.setSleep(rec.SleepAfter, rec.KeepAlive)
	return inst
}

// setSleep sets the sleep settings; a sleepAfter of 0 means the default.
func (inst *instance) setSleep(sleepAfter time.Duration, keepAlive bool) {
	if sleepAfter <= 0 {
		sleepAfter = store.DefaultSleepAfter
	}
	inst.sleepAfter.Store(int64(sleepAfter))
	inst.keepAlive.Store(keepAlive)
}

func (inst *instance) touch() { inst.lastActive.Store(time.Now().UnixNano()) }

type idLock struct {
	mu   sync.Mutex
	refs int
}

// New returns a Manager working through d. Call Recover before serving requests.
func New(cfg Config, log *slog.Logger, d Deps) (*Manager, error) {
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 5 * time.Second
	}
	if cfg.AgentTimeout <= 0 {
		cfg.AgentTimeout = 30 * time.Second
	}
	if cfg.DataDir == "" {
		cfg.DataDir = cfg.StateDir
	}
	if cfg.IdleCheckInterval <= 0 {
		cfg.IdleCheckInterval = time.Second
	}
	m := &Manager{
		cfg: cfg, log: log, store: d.Store, rt: d.Runtime, images: d.Images, nets: d.Networks, egress: d.Egress, rootfs: d.RootFS,
		layers: d.Layers, trees: d.Trees, egressCreds: d.EgressCredentials, auditor: d.Auditor, sleepSnap: d.SleepSnapshotter,
		locks:      map[string]*idLock{},
		instances:  map[string]*instance{},
		destroying: map[string]bool{},
		holds:      map[string]int{},
		sleeping:   map[string]bool{},
		stopReaper: make(chan struct{}),
	}
	m.runtimes = map[string]runtime.Runtime{}
	m.unavailable = map[string]error{}
	m.defaultRuntime = RuntimeRunc
	if d.Runtime != nil { // nil only in tests that start no sandbox
		m.runtimes[d.Runtime.Name()] = d.Runtime
		m.defaultRuntime = d.Runtime.Name()
	}
	p, err := installAgent(cfg.StateDir, cfg.AgentBinary)
	if err != nil {
		return nil, err
	}
	m.agentPath = p
	dir := filepath.Join(cfg.StateDir, "agents")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agents dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agents dir: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("agents dir: %w", err)
	}
	m.agentsDir = os.NewFile(uintptr(fd), dir)
	m.bg.Add(1)
	go m.reap()
	return m, nil
}

// lock takes the per-ID lifecycle lock and returns its release.
func (m *Manager) lock(id string) func() {
	m.locksMu.Lock()
	l := m.locks[id]
	if l == nil {
		l = &idLock{}
		m.locks[id] = l
	}
	l.refs++
	m.locksMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		m.locksMu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(m.locks, id)
		}
		m.locksMu.Unlock()
	}
}

// Info is a sandbox's public view.
type Info struct {
	ID           string
	Status       Status
	Image        string
	ImageID      string
	InstanceType string
	EnvVars      map[string]string
	CreatedAt    time.Time
	StartedAt    *time.Time
	Address      string
	LastError    string
	// LastActivityAt is the last activity on the running sandbox (API operation, preview
	// request, end of a held stream); absent when it is not running. The sandbox sleeps when
	// it is SleepAfter old and nothing holds the sandbox.
	LastActivityAt *time.Time
	// SleepAfter is the idle time before the sandbox sleeps, as a Go duration ("10m", "30s").
	SleepAfter string
	// KeepAlive: the sandbox never sleeps.
	KeepAlive bool
	// Snapshot is the snapshot the sandbox's disk was created or restored from, and Layers its
	// layers below the sandbox's own changes, newest first (snapshot.go).
	Snapshot string
	Layers   []string
	// SnapshotOnSleep: every sleep snapshots the sandbox's disk (sleep.go); LastSnapshot is
	// the ID of the last such snapshot and LastSnapshotError why the last attempt failed (""
	// once one succeeds).
	SnapshotOnSleep   bool
	LastSnapshot      string
	LastSnapshotError string
	// Runtime is the isolation backend the sandbox runs on: "runc" or "gvisor".
	Runtime string
	// SleepMode, on a sleeping sandbox, is what its sleep kept: "disk" (its files; processes
	// were stopped and do not restart on wake; see sleepNote) or
	// "memory" (a checkpoint of its processes). SleepNote says why a sleep kept only the disk.
	SleepMode string
	SleepNote string
}

func (m *Manager) info(rec store.Sandbox) Info {
	in := Info{
		ID: rec.ID, Status: statusOf(rec), Image: rec.ImageName, ImageID: rec.Image,
		InstanceType: rec.InstanceType, EnvVars: rec.EnvVars, CreatedAt: rec.CreatedAt,
		LastError: rec.LastError, SleepAfter: FormatSleepAfter(rec.SleepAfter), KeepAlive: rec.KeepAlive,
		Snapshot: rec.Snapshot, Layers: rec.Layers,
		SnapshotOnSleep: rec.SnapshotOnSleep, LastSnapshot: rec.LastSnapshot, LastSnapshotError: rec.LastSnapshotError,
		Runtime: rec.Runtime,
	}
	if in.Runtime == "" {
		in.Runtime = RuntimeRunc
	}
	if statusOf(rec) == StatusSleeping {
		if sr, ok := m.readSleepRecord(rec.ID); ok {
			in.SleepMode, in.SleepNote = sr.Mode, sr.Note
		} else {
			in.SleepMode, in.SleepNote = SleepModeDisk, m.sleepNote(rec)
		}
	}
	if !rec.StartedAt.IsZero() {
		t := rec.StartedAt
		in.StartedAt = &t
	}
	m.mu.RLock()
	if inst := m.instances[rec.ID]; inst != nil {
		in.Address = inst.net.Addr.String()
		t := time.Unix(0, inst.lastActive.Load()).UTC()
		in.LastActivityAt = &t
	}
	m.mu.RUnlock()
	return in
}

// CreateOptions are the options of get-or-create. They apply only when the sandbox is created.
type CreateOptions struct {
	ID           sandboxid.ID
	Image        string
	InstanceType string
	EnvVars      map[string]string
	// SleepAfter is the idle time before the sandbox sleeps: 0 means store.DefaultSleepAfter,
	// else MinSleepAfter–MaxSleepAfter. KeepAlive: it never sleeps (see Update).
	SleepAfter time.Duration
	KeepAlive  bool
	// SnapshotOnSleep: every sleep snapshots the sandbox's disk (see Deps.SleepSnapshotter).
	SnapshotOnSleep bool
	// Layers are snapshot layers (digests, newest first) below the new sandbox's disk, from
	// Snapshot; ImageName is the image name recorded when Image is an ID. Set by the snapshot
	// service (internal/snapshot), never from a request directly.
	Layers    []string
	Snapshot  string
	ImageName string
	// Runtime is the isolation backend ("runc", "gvisor"); "" means the manager's default
	// (SetDefaultRuntime).
	Runtime string
}

// GetOrCreate returns the sandbox with opts.ID, creating it if it does not exist, and makes sure
// it is running. created reports whether this call created it. Errors: INVALID_SANDBOX_ID
// (opts.ID unset), INVALID_INSTANCE_TYPE, IMAGE_NOT_FOUND, SANDBOX_START_FAILED.
func (m *Manager) GetOrCreate(ctx context.Context, opts CreateOptions, progress io.Writer) (Info, bool, error) {
	// A zero CreateOptions has no ID, which Parse never returns: refuse it before it is stored.
	if err := sandboxid.CheckName(opts.ID.String()); err != nil {
		return Info{}, false, err
	}
	id := opts.ID.String()
	it, err := LookupInstanceType(opts.InstanceType)
	if err != nil {
		return Info{}, false, err
	}
	if err := validateEnv(opts.EnvVars); err != nil {
		return Info{}, false, err
	}
	if opts.SleepAfter != 0 {
		if err := ValidateSleepAfter(opts.SleepAfter); err != nil {
			return Info{}, false, err
		}
	}
	rtName := opts.Runtime
	if rtName == "" {
		rtName = m.defaultRuntime
	}
	if _, err := m.backend(rtName); err != nil {
		return Info{}, false, err
	}
	unlock := m.lock(id)
	defer unlock()

	rec, err := m.store.Get(ctx, id)
	created := false
	switch {
	case err == nil:
	case errdefs.IsCode(err, errdefs.CodeSandboxNotFound):
		name := opts.Image
		if name == "" {
			name = "default"
		}
		img, err := m.images.Resolve(ctx, name, progress)
		if err != nil {
			return Info{}, false, err
		}
		if opts.ImageName != "" {
			name = opts.ImageName
		}
		rec, err = m.store.Insert(ctx, store.Sandbox{
			ID: id, Image: img.ID, ImageName: name, InstanceType: it.Name,
			Layers: opts.Layers, Snapshot: opts.Snapshot,
			EnvVars: opts.EnvVars, Status: string(StatusCreating),
			SleepAfter: opts.SleepAfter, KeepAlive: opts.KeepAlive, SnapshotOnSleep: opts.SnapshotOnSleep,
			Runtime: rtName, UserNS: m.cfg.UserNS && rtName == RuntimeRunc,
		})
		if err != nil {
			return Info{}, false, err
		}
		created = true
		m.log.InfoContext(ctx, "sandbox created", "sandbox_id", id, "image", img.ID, "instance_type", it.Name)
	default:
		return Info{}, false, err
	}
	if err := m.ensureLocked(ctx, rec, progress); err != nil {
		return Info{}, created, err
	}
	rec, err = m.store.Get(ctx, id)
	if err != nil {
		return Info{}, created, err
	}
	return m.info(rec), created, nil
}

// Get returns a sandbox's info without starting it.
func (m *Manager) Get(ctx context.Context, sid sandboxid.ID) (Info, error) {
	id := sid.String()
	rec, err := m.store.Get(ctx, id)
	if err != nil {
		return Info{}, err
	}
	return m.info(rec), nil
}

// List returns every sandbox's info, ordered by ID.
func (m *Manager) List(ctx context.Context) ([]Info, error) {
	recs, err := m.store.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(recs))
	for _, r := range recs {
		out = append(out, m.info(r))
	}
	return out, nil
}

// Ensure makes sure sandbox id is running and returns the client of its agent. Unknown →
// SANDBOX_NOT_FOUND. This is the hot path of every in-sandbox operation.
func (m *Manager) Ensure(ctx context.Context, sid sandboxid.ID) (*agentclient.Client, error) {
	id := sid.String()
	m.mu.RLock()
	inst := m.instances[id]
	m.mu.RUnlock()
	if inst != nil {
		inst.touch()
		return inst.agent, nil
	}
	unlock := m.lock(id)
	defer unlock()
	rec, err := m.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := m.ensureLocked(ctx, rec, nil); err != nil {
		return nil, err
	}
	m.mu.RLock()
	inst = m.instances[id]
	m.mu.RUnlock()
	if inst == nil {
		return nil, errdefs.Newf(errdefs.CodeSandboxStartFailed, "sandbox %q is not running", id)
	}
	return inst.agent, nil
}

// Touch records activity on sandbox id if it is running (a preview request on a pooled
// connection, which does not go through Ensure).
func (m *Manager) Touch(sid sandboxid.ID) {
	id := sid.String()
	m.mu.RLock()
	inst := m.instances[id]
	m.mu.RUnlock()
	if inst != nil {
		inst.touch()
	}
}

// Start starts a stopped sandbox and returns its info.
func (m *Manager) Start(ctx context.Context, id sandboxid.ID) (Info, error) {
	if _, err := m.Ensure(ctx, id); err != nil {
		return Info{}, err
	}
	return m.Get(ctx, id)
}

// Stop stops a running sandbox; its disk remains. Stopping a stopped sandbox is not an error.
func (m *Manager) Stop(ctx context.Context, sid sandboxid.ID) (Info, error) {
	id := sid.String()
	unlock := m.lock(id)
	defer unlock()
	rec, err := m.store.Get(ctx, id)
	if err != nil {
		return Info{}, err
	}
	if statusOf(rec) == StatusRunning {
		if err := m.transition(ctx, id, StatusStopping, ""); err != nil {
			return Info{}, err
		}
	}
	// Like a sleep, a stop is not cut short by the caller going away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	if err := m.teardown(ctx, rec, true); err != nil {
		m.recordFailure(ctx, id, "stop: "+err.Error())
		return Info{}, err
	}
	m.discardMemory(ctx, id) // a stopped sandbox starts afresh
	if err := m.transition(ctx, id, StatusStopped, ""); err != nil {
		return Info{}, err
	}
	rec.Status = string(StatusStopped)
	rec.LastError = ""
	return m.info(rec), nil
}

// Destroy stops the sandbox and removes everything of it: container, mounts, network, disk and
// record. Unknown → SANDBOX_NOT_FOUND.
func (m *Manager) Destroy(ctx context.Context, sid sandboxid.ID) error {
	id := sid.String()
	// A snapshot in progress holds the ID lock: end it, do not wait it out.
	defer m.cancelCaptures(id)()
	unlock := m.lock(id)
	unlocked := false
	defer func() {
		if !unlocked {
			unlock()
		}
	}()
	rec, err := m.store.Get(ctx, id)
	if err != nil {
		return err
	}
	// Before the teardown kills the agent: an operation it cuts short is then known to have
	// met a destroy (Gone), not an agent fault.
	m.mu.Lock()
	m.destroying[id] = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.destroying, id)
		m.mu.Unlock()
	}()
	if err := m.teardown(ctx, rec, false); err != nil {
		return err
	}
	_ = os.Remove(m.agentSock(id))
	if err := os.RemoveAll(m.sandboxDir(id)); err != nil {
		return fmt.Errorf("destroy %s: remove disk: %w", id, err)
	}
	if err := m.store.Delete(ctx, id); err != nil {
		return err
	}
	m.log.InfoContext(ctx, "sandbox destroyed", "sandbox_id", id)
	unlock()
	unlocked = true
	// Its sleep snapshots go with it (a failure leaves them, logged; the destroy stands).
	if s := m.sleepSnapshotter(); s != nil {
		if err := s.SandboxDestroyed(ctx, id); err != nil {
			m.log.WarnContext(ctx, "delete sleep snapshots of destroyed sandbox", "sandbox_id", id, "err", err)
		}
	}
	return nil
}

// Down reports whether sandbox id is stopping, stopped or sleeping, with its status: a
// request to its agent that failed then met a stop or sleep of the sandbox (its agent shut
// down under the request), not a fault of the agent.
func (m *Manager) Down(ctx context.Context, sid sandboxid.ID) (Status, bool) {
	id := sid.String()
	rec, err := m.store.Get(context.WithoutCancel(ctx), id)
	if err != nil {
		return "", false
	}
	switch st := statusOf(rec); st {
	case StatusStopping, StatusStopped, StatusSleeping:
		return st, true
	default:
		return st, false
	}
}

// Gone reports whether sandbox id is being destroyed or no longer exists. An in-sandbox
// operation that failed (its agent killed, its connection cut, its context cancelled by the
// agent's shutdown) reports SANDBOX_NOT_FOUND when Gone says so, whatever point of the destroy
// it met. A store that cannot be read answers false: the failure is then reported as it is.
func (m *Manager) Gone(ctx context.Context, sid sandboxid.ID) bool {
	id := sid.String()
	m.mu.RLock()
	destroying := m.destroying[id]
	m.mu.RUnlock()
	if destroying {
		return true
	}
	_, err := m.store.Get(context.WithoutCancel(ctx), id)
	return errdefs.IsCode(err, errdefs.CodeSandboxNotFound)
}

// Close stops the idle reaper (waiting for sleeps it has begun) and releases the manager's
// in-memory resources. Running sandboxes keep running; the next hutchd re-adopts them (see
// Recover). Call it once, after the API has stopped serving.
func (m *Manager) Close() {
	m.closeOnce.Do(func() { close(m.stopReaper) })
	m.bg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, inst := range m.instances {
		inst.transport.CloseIdleConnections()
	}
	m.agentsDir.Close()
}

func (m *Manager) sandboxDir(id string) string { return filepath.Join(m.cfg.DataDir, "sandboxes", id) }

func validateEnv(env map[string]string) error {
	for k := range env {
		if k == "" || len(k) > 1024 {
			return errdefs.New(errdefs.CodeInvalidArgument, "environment variable names must be 1-1024 characters").With("name", k)
		}
		for i := 0; i < len(k); i++ {
			c := k[i]
			if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
				return errdefs.Newf(errdefs.CodeInvalidArgument, "invalid environment variable name %q", k).With("name", k)
			}
		}
	}
	for k, v := range env {
		for i := 0; i < len(v); i++ {
			if v[i] == 0 {
				return errdefs.Newf(errdefs.CodeInvalidArgument, "environment variable %q has a NUL byte", k).With("name", k)
			}
		}
	}
	// Every process of the sandbox is started with this env: one the kernel refuses would leave
	// the sandbox unable to start (E2BIG), in error.
	return envlimit.Check("envVars", env)
}

// Recheck is called when the agent of a sandbox believed running cannot be reached. If the
// container is no longer running (its agent crashed, or sandbox code killed it), the sandbox is
// torn down and recorded as stopped, so the next Ensure starts it again; it reports whether that
// happened. A sandbox whose container still runs is left alone.
func (m *Manager) Recheck(ctx context.Context, sid sandboxid.ID) bool {
	id := sid.String()
	unlock := m.lock(id)
	defer unlock()
	m.mu.RLock()
	inst := m.instances[id]
	m.mu.RUnlock()
	if inst == nil {
		return true // already stopped by someone else: the next Ensure starts it
	}
	rec, err := m.store.Get(ctx, id)
	if err != nil {
		return false
	}
	if rt, err := m.runtimeOf(rec); err == nil {
		if st, err := rt.State(ctx, id); err == nil && st.Status == runtime.StatusRunning && st.Pid == inst.pid {
			return false
		}
	}
	m.log.WarnContext(ctx, "sandbox container is gone; marking stopped", "sandbox_id", id)
	m.audit(ctx, AuditStopped, id, slog.String("reason", "container exited unexpectedly"))
	if err := m.teardown(ctx, rec, false); err != nil {
		m.log.ErrorContext(ctx, "teardown after container loss", "sandbox_id", id, "err", err)
		return false
	}
	if err := m.transition(ctx, id, StatusStopped, "container exited unexpectedly"); err != nil {
		m.log.ErrorContext(ctx, "record container loss", "sandbox_id", id, "err", err)
		return false
	}
	return true
}
