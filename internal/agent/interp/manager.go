package interp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// Defaults of Config.
const (
	DefaultMaxContexts    = 32
	DefaultPoolSize       = 1
	DefaultInterruptGrace = 5 * time.Second
)

// Config configures a Manager.
type Config struct {
	// MaxContexts is the most contexts alive at once; 0 means DefaultMaxContexts.
	MaxContexts int
	// PoolSize is how many pre-started kernels each language keeps (0–4); 0 means
	// DefaultPoolSize, negative disables the pool. A language's pool is filled on its first
	// use (or by Warm), so idle sandboxes start no interpreter.
	PoolSize int
	// InterruptGrace is how long a timed-out or interrupted run may take to stop before its
	// kernel is killed and replaced (the context then loses its state); 0 means
	// DefaultInterruptGrace.
	InterruptGrace time.Duration
	// Logger receives diagnostics; nil means slog.Default().
	Logger *slog.Logger
}

// Context describes a code context.
type Context = agentapi.CodeContext

// Manager keeps code contexts. It is safe for concurrent use.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	factories map[string]KernelFactory // guarded by mu
	pools     map[string]*pool         // guarded by mu
	contexts  map[string]*codeContext  // guarded by mu
	starting  int                      // guarded by mu; Creates that hold a slot while their kernel starts
	closed    bool                     // guarded by mu
	wg        sync.WaitGroup           // pool refills
}

// codeContext is one context: its kernel and the lock that serialises its runs.
type codeContext struct {
	info Context
	env  map[string]string
	run  sync.Mutex // held by the run in progress

	mu      sync.Mutex
	kernel  Kernel // guarded by mu; replaced when it dies or does not stop
	deleted bool   // guarded by mu
}

// pool holds pre-started kernels of one language.
type pool struct {
	ready   []Kernel // guarded by Manager.mu
	filling int      // refills in flight; guarded by Manager.mu
}

// NewManager returns a Manager with no languages.
func NewManager(cfg Config) *Manager {
	if cfg.MaxContexts <= 0 {
		cfg.MaxContexts = DefaultMaxContexts
	}
	if cfg.PoolSize == 0 {
		cfg.PoolSize = DefaultPoolSize
	}
	cfg.PoolSize = min(cfg.PoolSize, 4)
	if cfg.InterruptGrace <= 0 {
		cfg.InterruptGrace = DefaultInterruptGrace
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Manager{cfg: cfg, log: cfg.Logger, factories: map[string]KernelFactory{}, pools: map[string]*pool{}, contexts: map[string]*codeContext{}}
}

// Register makes language lang available, its kernels started by f. A second Register of the
// same language replaces the factory.
func (m *Manager) Register(lang string, f KernelFactory) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.factories[lang] = f
	if m.pools[lang] == nil {
		m.pools[lang] = &pool{}
	}
}

// Languages returns the registered languages, sorted.
func (m *Manager) Languages() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.factories))
}

// Warm starts filling lang's pool in the background. Errors: INVALID_LANGUAGE.
func (m *Manager) Warm(lang string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.factories[lang]; !ok {
		return m.invalidLanguage(lang)
	}
	m.refillLocked(lang)
	return nil
}

func (m *Manager) invalidLanguage(lang string) error {
	return errdefs.Newf(errdefs.CodeInvalidLanguage, "unknown language %q", lang).
		With("language", lang).With("languages", slices.Sorted(maps.Keys(m.factories)))
}

// refillLocked starts background starts until lang's pool holds PoolSize kernels. m.mu held.
func (m *Manager) refillLocked(lang string) {
	p, f := m.pools[lang], m.factories[lang]
	if m.closed || m.cfg.PoolSize < 0 || p == nil || f == nil {
		return
	}
	for len(p.ready)+p.filling < m.cfg.PoolSize {
		p.filling++
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) //nolint:forbidigo // a pool refill outlives the request that used a kernel
			k, err := f(ctx, "", nil)
			cancel()
			m.mu.Lock()
			p.filling--
			if err != nil {
				m.mu.Unlock()
				m.log.Warn("interp: could not pre-start a kernel", "language", lang, "err", err)
				return
			}
			if _, pooled := k.(Configurer); m.closed || !pooled {
				m.mu.Unlock()
				_ = k.Close()
				return
			}
			p.ready = append(p.ready, k)
			m.mu.Unlock()
		}()
	}
}

// takePooled returns a live pooled kernel of lang, or nil. It starts a refill.
func (m *Manager) takePooled(lang string) Kernel {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pools[lang]
	var k Kernel
	for p != nil && len(p.ready) > 0 {
		k, p.ready = p.ready[0], p.ready[1:]
		if !k.Exited() {
			break
		}
		_ = k.Close()
		k = nil
	}
	m.refillLocked(lang)
	return k
}

// startKernel returns a kernel of lang with cwd and env: a pooled one configured, or a new one.
func (m *Manager) startKernel(ctx context.Context, lang, cwd string, env map[string]string) (Kernel, error) {
	m.mu.Lock()
	f, ok := m.factories[lang]
	closed := m.closed
	m.mu.Unlock()
	if !ok {
		return nil, m.invalidLanguage(lang)
	}
	if closed {
		return nil, errdefs.New(errdefs.CodeUnavailable, "the code interpreter is shutting down")
	}
	if k := m.takePooled(lang); k != nil {
		err := k.(Configurer).Configure(ctx, cwd, env)
		if err == nil {
			return k, nil
		}
		_ = k.Close()
		if e := (*errdefs.Error)(nil); errors.As(err, &e) {
			return nil, err // cwd or env refused: a fresh kernel would refuse them too
		}
		m.log.Warn("interp: pooled kernel failed to configure; starting a new one", "language", lang, "err", err)
	}
	return f(ctx, cwd, env)
}

// Create starts a context of lang with cwd ("" means the kernel's default) and env (added to
// the sandbox environment). A slot is reserved before the kernel starts, so concurrent creates
// never start more than Config.MaxContexts kernels: the ones past the limit fail at once.
// Errors: INVALID_LANGUAGE, CONTEXT_LIMIT_EXCEEDED, UNAVAILABLE (the manager is closed), and
// the factory's (INTERPRETER_NOT_AVAILABLE, INTERPRETER_START_TIMEOUT, INVALID_PATH for a bad
// cwd).
func (m *Manager) Create(ctx context.Context, lang, cwd string, env map[string]string) (Context, error) {
	m.mu.Lock()
	if _, ok := m.factories[lang]; !ok {
		defer m.mu.Unlock()
		return Context{}, m.invalidLanguage(lang)
	}
	if len(m.contexts)+m.starting >= m.cfg.MaxContexts {
		m.mu.Unlock()
		return Context{}, errdefs.Newf(errdefs.CodeContextLimit, "at most %d code contexts may be alive; delete one first", m.cfg.MaxContexts).With("max", m.cfg.MaxContexts)
	}
	m.starting++
	m.mu.Unlock()
	k, err := m.startKernel(ctx, lang, cwd, env)
	m.mu.Lock()
	m.starting--
	if err != nil {
		m.mu.Unlock()
		return Context{}, err
	}
	if m.closed {
		m.mu.Unlock()
		_ = k.Close()
		return Context{}, errdefs.New(errdefs.CodeUnavailable, "the code interpreter is shutting down")
	}
	c := &codeContext{info: Context{ID: newID(), Language: lang, Cwd: cwd, CreatedAt: time.Now().UTC()}, env: maps.Clone(env), kernel: k}
	m.contexts[c.info.ID] = c
	m.mu.Unlock()
	return c.info, nil
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "ctx-" + hex.EncodeToString(b)
}

// List returns the contexts, oldest first.
func (m *Manager) List() []Context {
	m.mu.Lock()
	out := make([]Context, 0, len(m.contexts))
	for _, c := range m.contexts {
		out = append(out, c.info)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Get returns context id. Errors: CONTEXT_NOT_FOUND.
func (m *Manager) Get(id string) (Context, error) {
	c, err := m.lookup(id)
	if err != nil {
		return Context{}, err
	}
	return c.info, nil
}

func (m *Manager) lookup(id string) (*codeContext, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.contexts[id]
	if !ok {
		return nil, errdefs.Newf(errdefs.CodeContextNotFound, "code context %q not found", id).With("id", id)
	}
	return c, nil
}

// Delete removes context id and kills its kernel's process tree (a run in progress ends with
// an error). Errors: CONTEXT_NOT_FOUND.
func (m *Manager) Delete(id string) error {
	m.mu.Lock()
	c, ok := m.contexts[id]
	delete(m.contexts, id)
	m.mu.Unlock()
	if !ok {
		return errdefs.Newf(errdefs.CodeContextNotFound, "code context %q not found", id).With("id", id)
	}
	c.mu.Lock()
	c.deleted = true
	k := c.kernel
	c.mu.Unlock()
	return k.Close()
}

// Interrupt interrupts the run in progress on context id, if any (Python: KeyboardInterrupt;
// the run ends with an error event). Errors: CONTEXT_NOT_FOUND.
func (m *Manager) Interrupt(id string) error {
	c, err := m.lookup(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	k := c.kernel
	c.mu.Unlock()
	return k.Interrupt()
}

// Run runs code on context id, calling emit for each event (from Run's goroutine or the
// kernel's; never concurrently), and returns when the run ended: its last event is
// execution_complete, or error. Runs on one context wait for each other; different contexts
// run in parallel. After timeout (0: none) the run is interrupted and ends with an error
// named TimeoutError; a kernel that does not stop within Config.InterruptGrace (or that died)
// is replaced, and the error says that the context's state was lost. If ctx ends (the caller
// left) the run is interrupted too. Errors (before any event): CONTEXT_NOT_FOUND.
func (m *Manager) Run(ctx context.Context, id, code string, timeout time.Duration, emit func(Event)) error {
	c, err := m.lookup(id)
	if err != nil {
		return err
	}
	c.run.Lock()
	defer c.run.Unlock()
	c.mu.Lock()
	k, deleted := c.kernel, c.deleted
	c.mu.Unlock()
	if deleted {
		return errdefs.Newf(errdefs.CodeContextNotFound, "code context %q not found", id).With("id", id)
	}
	if k.Exited() {
		// The interpreter died between runs (the code ended it): start a new one.
		if k, err = m.replaceKernel(ctx, c, k); err != nil {
			emit(Event{Type: EventError, Name: "KernelError", Value: err.Error()})
			return nil
		}
		emit(Event{Type: EventStderr, Text: "hutch: the interpreter of this context had exited; it was restarted and its state is lost\n"})
	}

	var (
		emu      sync.Mutex
		stopped  bool // an error was emitted by the manager or the run is over
		timedOut bool
		errored  bool
	)
	send := func(ev Event) {
		emu.Lock()
		defer emu.Unlock()
		if stopped || ev.Type == EventComplete {
			return
		}
		if ev.Type == EventError {
			if timedOut {
				return // the kernel's KeyboardInterrupt: the TimeoutError stands for it
			}
			errored = true
		}
		emit(ev)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	type outcome struct {
		count int
		err   error
	}
	done := make(chan outcome, 1)
	go func() {
		n, err := k.Run(runCtx, code, send)
		done <- outcome{n, err}
	}()
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	var grace <-chan time.Time
	ctxDone := ctx.Done()
	for {
		select {
		case o := <-done:
			emu.Lock()
			defer emu.Unlock()
			switch {
			case timedOut:
				stopped = true
				emit(Event{Type: EventError, Name: "TimeoutError", Value: fmt.Sprintf("execution timed out after %s and was interrupted; the context keeps its state", timeout)})
			case o.err != nil:
				stopped = true
				m.emitKernelLost(ctx, c, k, o.err, emit)
			case !errored:
				stopped = true
				emit(Event{Type: EventComplete, ExecutionCount: o.count})
			default:
				stopped = true
			}
			return nil
		case <-timer:
			timer = nil
			emu.Lock()
			timedOut = true
			emu.Unlock()
			_ = k.Interrupt()
			grace = time.After(m.cfg.InterruptGrace)
		case <-ctxDone:
			ctxDone = nil
			_ = k.Interrupt()
			grace = time.After(m.cfg.InterruptGrace)
		case <-grace:
			// The kernel did not stop: kill it and start a fresh one.
			emu.Lock()
			stopped = true
			wasTimeout := timedOut
			emu.Unlock()
			_ = k.Close()
			<-done
			_, rerr := m.replaceKernel(context.WithoutCancel(ctx), c, k)
			msg := "the run did not stop when interrupted; the interpreter was restarted and the context's state is lost"
			if rerr != nil {
				msg = fmt.Sprintf("the run did not stop when interrupted and the interpreter could not be restarted: %v", rerr)
			}
			name := "InterruptError"
			if wasTimeout {
				name = "TimeoutError"
				msg = fmt.Sprintf("execution timed out after %s; %s", timeout, msg)
			}
			emit(Event{Type: EventError, Name: name, Value: msg})
			return nil
		}
	}
}

// emitKernelLost reports a kernel that failed during a run, and replaces it (unless the
// context was deleted, which kills the kernel on purpose).
func (m *Manager) emitKernelLost(ctx context.Context, c *codeContext, k Kernel, cause error, emit func(Event)) {
	c.mu.Lock()
	deleted := c.deleted
	c.mu.Unlock()
	if deleted {
		emit(Event{Type: EventError, Name: "KernelError", Value: "the context was deleted during the run"})
		return
	}
	_, err := m.replaceKernel(context.WithoutCancel(ctx), c, k)
	msg := fmt.Sprintf("the interpreter exited during the run (%v); it was restarted and the context's state is lost", cause)
	if err != nil {
		msg = fmt.Sprintf("the interpreter exited during the run (%v) and could not be restarted: %v", cause, err)
	}
	emit(Event{Type: EventError, Name: "KernelError", Value: msg})
}

// replaceKernel closes old and installs a new kernel for c, unless c was deleted.
func (m *Manager) replaceKernel(ctx context.Context, c *codeContext, old Kernel) (Kernel, error) {
	_ = old.Close()
	k, err := m.startKernel(ctx, c.info.Language, c.info.Cwd, c.env)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted {
		_ = k.Close()
		return nil, errors.New("the context was deleted")
	}
	c.kernel = k
	return k, nil
}

// Close kills every context's kernel and the pooled ones, and refuses new contexts.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	var ks []Kernel
	for id, c := range m.contexts {
		c.mu.Lock()
		c.deleted = true
		ks = append(ks, c.kernel)
		c.mu.Unlock()
		delete(m.contexts, id)
	}
	for _, p := range m.pools {
		ks = append(ks, p.ready...)
		p.ready = nil
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, k := range ks {
		wg.Go(func() { _ = k.Close() })
	}
	wg.Wait()
	m.wg.Wait() // refills in flight close what they started
}
