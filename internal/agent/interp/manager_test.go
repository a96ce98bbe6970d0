package interp

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

// fakeKernel is a Kernel for the Manager's logic: "sleep" blocks until interrupted (or
// forever with "hang"), "die" fails the run, anything else echoes the code as a result.
type fakeKernel struct {
	mu         sync.Mutex
	cwd        string
	env        map[string]string
	count      int
	closed     bool
	interrupts chan struct{}
	active     *atomic.Int32 // runs in progress over all kernels of a test
	maxActive  *atomic.Int32
}

func (k *fakeKernel) Run(ctx context.Context, code string, emit func(Event)) (int, error) {
	n := k.active.Add(1)
	defer k.active.Add(-1)
	for {
		m := k.maxActive.Load()
		if n <= m || k.maxActive.CompareAndSwap(m, n) {
			break
		}
	}
	k.mu.Lock()
	k.count++
	c := k.count
	closed := k.closed
	k.mu.Unlock()
	if closed {
		return 0, errors.New("closed")
	}
	switch code {
	case "sleep":
		select {
		case <-k.interrupts:
			emit(Event{Type: EventError, Name: "KeyboardInterrupt"})
			return c, nil
		case <-time.After(10 * time.Second):
		}
	case "hang":
		time.Sleep(300 * time.Millisecond)
		k.mu.Lock()
		closed = k.closed
		k.mu.Unlock()
		if !closed {
			time.Sleep(10 * time.Second)
		}
		return 0, errors.New("killed")
	case "die":
		return 0, errors.New("died")
	case "wait":
		time.Sleep(100 * time.Millisecond)
	case "raise":
		emit(Event{Type: EventError, Name: "ValueError", Value: "v"})
		return c, nil
	}
	emit(Event{Type: EventStdout, Text: "cwd=" + k.cwd + " env=" + k.env["K"]})
	emit(Event{Type: EventResult, Data: map[string]any{"text/plain": code}, ExecutionCount: c})
	emit(Event{Type: EventComplete, ExecutionCount: 99}) // the manager's own one counts
	return c, nil
}

func (k *fakeKernel) Interrupt() error {
	select {
	case k.interrupts <- struct{}{}:
	default:
	}
	return nil
}

func (k *fakeKernel) Close() error { k.mu.Lock(); k.closed = true; k.mu.Unlock(); return nil }
func (k *fakeKernel) Exited() bool { k.mu.Lock(); defer k.mu.Unlock(); return k.closed }

func (k *fakeKernel) Configure(_ context.Context, cwd string, env map[string]string) error {
	if cwd == "/bad" {
		return errdefs.New(errdefs.CodeInvalidPath, "bad cwd")
	}
	k.cwd, k.env = cwd, env
	return nil
}

// fakeFactory counts the kernels it starts.
type fakeFactory struct {
	started, active, maxActive atomic.Int32
	mu                         sync.Mutex
	kernels                    []*fakeKernel
}

func (f *fakeFactory) start(_ context.Context, cwd string, env map[string]string) (Kernel, error) {
	f.started.Add(1)
	k := &fakeKernel{cwd: cwd, env: env, interrupts: make(chan struct{}, 1), active: &f.active, maxActive: &f.maxActive}
	f.mu.Lock()
	f.kernels = append(f.kernels, k)
	f.mu.Unlock()
	return k, nil
}

func (f *fakeFactory) liveKernels() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, k := range f.kernels {
		if !k.Exited() {
			n++
		}
	}
	return n
}

func run(t *testing.T, m *Manager, id, code string, timeout time.Duration) []Event {
	t.Helper()
	var evs []Event
	if err := m.Run(context.Background(), id, code, timeout, func(e Event) { evs = append(evs, e) }); err != nil {
		t.Fatalf("Run(%q): %v", code, err)
	}
	return evs
}

func TestManagerContexts(t *testing.T) {
	f := &fakeFactory{}
	m := NewManager(Config{MaxContexts: 3, PoolSize: -1})
	defer m.Close()
	m.Register("fake", f.start)
	ctx := context.Background()
	if _, err := m.Create(ctx, "cobol", "", nil); errdefs.CodeOf(err) != errdefs.CodeInvalidLanguage {
		t.Fatalf("unknown language: %v", err)
	}
	a, err := m.Create(ctx, "fake", "/a", map[string]string{"K": "ka"})
	if err != nil || a.Language != "fake" || a.Cwd != "/a" || !strings.HasPrefix(a.ID, "ctx-") || a.CreatedAt.IsZero() {
		t.Fatalf("create: %+v %v", a, err)
	}
	b, _ := m.Create(ctx, "fake", "", nil)
	c, _ := m.Create(ctx, "fake", "", nil)
	if _, err := m.Create(ctx, "fake", "", nil); errdefs.CodeOf(err) != errdefs.CodeContextLimit {
		t.Fatalf("limit: %v", err)
	}
	if l := m.List(); len(l) != 3 || l[0].ID != a.ID {
		t.Fatalf("list %+v", l)
	}
	evs := run(t, m, a.ID, "one", 0)
	if len(evs) != 3 || evs[0].Text != "cwd=/a env=ka" || evs[2].Type != EventComplete || evs[2].ExecutionCount != 1 {
		t.Fatalf("events %+v", evs)
	}
	if evs := run(t, m, a.ID, "raise", 0); len(evs) != 1 || evs[0].Type != EventError {
		t.Fatalf("error run: %+v", evs)
	}
	if err := m.Delete(b.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{b.ID, "ctx-nope"} {
		if _, err := m.Get(id); errdefs.CodeOf(err) != errdefs.CodeContextNotFound {
			t.Fatalf("get %s: %v", id, err)
		}
		if err := m.Run(ctx, id, "x", 0, func(Event) {}); errdefs.CodeOf(err) != errdefs.CodeContextNotFound {
			t.Fatalf("run %s: %v", id, err)
		}
		if err := m.Delete(id); errdefs.CodeOf(err) != errdefs.CodeContextNotFound {
			t.Fatalf("delete %s: %v", id, err)
		}
		if err := m.Interrupt(id); errdefs.CodeOf(err) != errdefs.CodeContextNotFound {
			t.Fatalf("interrupt %s: %v", id, err)
		}
	}
	_ = c
	m.Close()
	if n := f.liveKernels(); n != 0 {
		t.Fatalf("%d kernels alive after Close", n)
	}
	if _, err := m.Create(ctx, "fake", "", nil); err == nil {
		t.Fatal("create after Close succeeded")
	}
}

func TestManagerSerialisesRunsPerContext(t *testing.T) {
	f := &fakeFactory{}
	m := NewManager(Config{PoolSize: -1})
	defer m.Close()
	m.Register("fake", f.start)
	a, _ := m.Create(context.Background(), "fake", "", nil)
	b, _ := m.Create(context.Background(), "fake", "", nil)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { run(t, m, a.ID, "wait", 0) })
	}
	wg.Wait()
	if got := f.maxActive.Load(); got != 1 {
		t.Fatalf("%d runs at once on one context", got)
	}
	f.maxActive.Store(0)
	wg.Go(func() { run(t, m, a.ID, "wait", 0) })
	wg.Go(func() { run(t, m, b.ID, "wait", 0) })
	wg.Wait()
	if got := f.maxActive.Load(); got != 2 {
		t.Fatalf("contexts did not run in parallel (max %d at once)", got)
	}
}

func TestManagerTimeoutAndInterrupt(t *testing.T) {
	f := &fakeFactory{}
	m := NewManager(Config{PoolSize: -1, InterruptGrace: 500 * time.Millisecond})
	defer m.Close()
	m.Register("fake", f.start)
	a, _ := m.Create(context.Background(), "fake", "", nil)
	evs := run(t, m, a.ID, "sleep", 100*time.Millisecond)
	if len(evs) != 1 || evs[0].Name != "TimeoutError" || !strings.Contains(evs[0].Value, "keeps its state") {
		t.Fatalf("timeout events %+v", evs)
	}
	if f.started.Load() != 1 {
		t.Fatal("the kernel was replaced after an interrupt it obeyed")
	}
	// An interrupt on demand.
	go func() { time.Sleep(100 * time.Millisecond); _ = m.Interrupt(a.ID) }()
	if evs := run(t, m, a.ID, "sleep", 0); len(evs) != 1 || evs[0].Name != "KeyboardInterrupt" {
		t.Fatalf("interrupt events %+v", evs)
	}
	// A kernel that ignores the interrupt is replaced.
	evs = run(t, m, a.ID, "hang", 100*time.Millisecond)
	if len(evs) != 1 || evs[0].Name != "TimeoutError" || !strings.Contains(evs[0].Value, "state is lost") {
		t.Fatalf("hang events %+v", evs)
	}
	if f.started.Load() != 2 || f.liveKernels() != 1 {
		t.Fatalf("started %d, live %d", f.started.Load(), f.liveKernels())
	}
	if evs := run(t, m, a.ID, "again", 0); evs[len(evs)-1].Type != EventComplete {
		t.Fatalf("after replacement %+v", evs)
	}
	// A kernel that dies during a run is replaced and the run says so.
	evs = run(t, m, a.ID, "die", 0)
	if len(evs) != 1 || evs[0].Name != "KernelError" || !strings.Contains(evs[0].Value, "restarted") {
		t.Fatalf("die events %+v", evs)
	}
	if f.started.Load() != 3 || f.liveKernels() != 1 {
		t.Fatalf("started %d, live %d", f.started.Load(), f.liveKernels())
	}
}

func TestManagerPool(t *testing.T) {
	f := &fakeFactory{}
	m := NewManager(Config{PoolSize: 2})
	m.Register("fake", f.start)
	if err := m.Warm("fake"); err != nil {
		t.Fatal(err)
	}
	if err := m.Warm("nope"); errdefs.CodeOf(err) != errdefs.CodeInvalidLanguage {
		t.Fatalf("warm unknown: %v", err)
	}
	waitFor(t, func() bool { return f.started.Load() == 2 })
	c, err := m.Create(context.Background(), "fake", "/p", map[string]string{"K": "kp"})
	if err != nil {
		t.Fatal(err)
	}
	if evs := run(t, m, c.ID, "x", 0); evs[0].Text != "cwd=/p env=kp" {
		t.Fatalf("pooled kernel not configured: %+v", evs)
	}
	waitFor(t, func() bool { return f.started.Load() == 3 }) // refilled
	if _, err := m.Create(context.Background(), "fake", "/bad", nil); errdefs.CodeOf(err) != errdefs.CodeInvalidPath {
		t.Fatalf("bad cwd: %v", err)
	}
	m.Close()
	if n := f.liveKernels(); n != 0 {
		t.Fatalf("%d kernels alive after Close", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	if !testutil.Poll(t, 5*time.Millisecond, 10*time.Second, cond) {
		t.Fatal("condition not met within 10 s")
	}
}
