package interp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// Findings of a second adversarial pass: values whose every property access throws, an
// interrupt racing the end of a run, concurrent creates past the context limit, and code that
// closes the interpreter's fds 1 and 2.

// errorEvents returns the error events of a run.
func errorEvents(evs []Event) []Event {
	var out []Event
	for _, e := range evs {
		if e.Type == EventError {
			out = append(out, e)
		}
	}
	return out
}

// TestUnprintableValues: a thrown value (or a result, or a printed value) whose properties,
// str(), repr() or proxy traps throw ends the run with an error (or prints something), never
// hangs it or kills the interpreter; the context keeps its state.
func TestUnprintableValues(t *testing.T) {
	type step struct {
		code     string
		wantErr  bool   // the run ends with an error event
		wantName string // its name, when not ""
	}
	cases := map[string][]step{
		"javascript": {
			{code: "throw {get stack(){throw 1}}", wantErr: true},
			{code: `const e=new Error("x"); Object.defineProperty(e,"stack",{get(){throw new Error("s")}}); throw e`, wantErr: true},
			{code: "throw new Proxy({}, {get(){throw 2}})", wantErr: true},
			{code: "throw new Proxy({}, {get(){throw 2}, getPrototypeOf(){throw 3}, has(){throw 4}, ownKeys(){throw 5}, getOwnPropertyDescriptor(){throw 6}})", wantErr: true},
			{code: "throw {get name(){throw 1}, get message(){throw 1}, get stack(){throw 1}}", wantErr: true},
			{code: "throw Object.create(null)", wantErr: true},
			{code: "const ee = new Error('m'); ee.name = {toString(){throw 1}}; throw ee", wantErr: true},
			{code: "Promise.reject({get stack(){throw 1}}); 1"},
			{code: "console.log({get stack(){throw 1}})"},
			{code: "console.log(new Proxy({}, {get(){throw 2}}))"},
			{code: "console.log(new Proxy({}, {get(){throw 2}, getPrototypeOf(){throw 3}, has(){throw 4}, ownKeys(){throw 5}, getOwnPropertyDescriptor(){throw 6}}))"},
			{code: "new Proxy({}, {get(){throw 2}, getPrototypeOf(){throw 3}, has(){throw 4}, ownKeys(){throw 5}, getOwnPropertyDescriptor(){throw 6}, apply(){throw 7}})"},
			// A custom inspect that throws is the run's error, as a failing __repr__ in Python.
			{code: "({get toJSON(){throw 1}, [Symbol.for('nodejs.util.inspect.custom')](){throw 2}})", wantErr: true},
			{code: "const rp = Proxy.revocable({}, {}); rp.revoke(); rp.proxy"},
			{code: "throw rp.proxy", wantErr: true},
			{code: "await Promise.reject(new Proxy({}, {get(){throw 2}, getPrototypeOf(){throw 3}}))", wantErr: true},
		},
		"python": {
			{code: "class E(Exception):\n  def __str__(self): raise ValueError('str')\n  def __repr__(self): raise ValueError('repr')\n  @property\n  def args(self): raise ValueError('args')\nraise E()", wantErr: true, wantName: "E"},
			{code: "class M(type):\n  @property\n  def __name__(cls): raise ValueError('name')\nclass F(Exception, metaclass=M):\n  def __str__(self): raise ValueError('str')\nraise F()", wantErr: true},
			{code: "class G(Exception):\n  @property\n  def __traceback__(self): raise ValueError('tb')\n  def __str__(self): raise ValueError('str')\nraise G()", wantErr: true},
			{code: "class R:\n  def __repr__(self): raise KeyboardInterrupt\nR()", wantErr: true},
			{code: "class P:\n  def __str__(self): raise ValueError('s')\n  def __repr__(self): raise ValueError('r')\nprint(P())", wantErr: true, wantName: "ValueError"},
		},
	}
	for _, kc := range kernelCases {
		t.Run(kc.lang, func(t *testing.T) {
			k := kc.start(t, false)
			runWithin(t, k, "kept = 41", 30*time.Second)
			for _, st := range cases[kc.lang] {
				evs := runWithin(t, k, st.code, 15*time.Second)
				errs := errorEvents(evs)
				for _, e := range errs {
					t.Logf("%.50q: %s: %.80q %.120q", st.code, e.Name, e.Value, e.Traceback)
				}
				switch {
				case st.wantErr && len(errs) != 1:
					t.Errorf("%q: want one error event, got %+v", st.code, evs)
				case st.wantErr && errs[0].Name == "":
					t.Errorf("%q: error without a name: %+v", st.code, errs[0])
				case st.wantErr && st.wantName != "" && errs[0].Name != st.wantName:
					t.Errorf("%q: error name %q, want %q", st.code, errs[0].Name, st.wantName)
				case !st.wantErr && len(errs) != 0:
					t.Errorf("%q: unexpected error %+v", st.code, errs)
				}
				if k.Exited() {
					t.Fatalf("%q killed the interpreter", st.code)
				}
				if got := results(runWithin(t, k, "kept + 1", 15*time.Second)); len(got) != 1 || got[0] != "42" {
					t.Fatalf("after %q: kept + 1 = %q", st.code, got)
				}
			}
		})
	}
}

// TestPythonInterruptRace: interrupts sent 0–30 ms after the start of short runs, so that many
// land while the driver finishes a run or reads the next command. Every run ends promptly (with
// or without KeyboardInterrupt) and the context keeps its state.
func TestPythonInterruptRace(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test")
	}
	needIPython(t)
	k := newPython(t, "", nil)
	collect(t, k, "kept = 41\nimport time")
	const iterations = 300
	interrupted := 0
	for i := range iterations {
		code := fmt.Sprintf("time.sleep(0.0%d); x = %d", i%4, i)
		var (
			mu  sync.Mutex
			evs []Event
		)
		done := make(chan error, 1)
		go func() {
			_, err := k.Run(context.Background(), code, func(e Event) { mu.Lock(); evs = append(evs, e); mu.Unlock() })
			done <- err
		}()
		time.Sleep(time.Duration(rand.IntN(30_000)) * time.Microsecond)
		if err := k.Interrupt(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("iteration %d: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("iteration %d (%q): the run did not end after an interrupt", i, code)
		}
		mu.Lock()
		for _, e := range errorEvents(evs) {
			if e.Name != "KeyboardInterrupt" {
				t.Fatalf("iteration %d: error %+v", i, e)
			}
			interrupted++
		}
		mu.Unlock()
	}
	t.Logf("%d of %d runs interrupted", interrupted, iterations)
	if got := results(runWithin(t, k, "kept + 1", 15*time.Second)); len(got) != 1 || got[0] != "42" {
		t.Fatalf("state lost: kept + 1 = %q", got)
	}
	if k.Exited() {
		t.Fatal("the interpreter exited")
	}
}

// TestClosedStdFds: code that closes fds 1 and 2 does not slow down later runs (the end-of-run
// markers still come through), and later child processes' output is forwarded again.
func TestClosedStdFds(t *testing.T) {
	closeCode := map[string]string{
		"python":     "import os\nos.close(1)\nos.close(2)",
		"javascript": "require('fs').closeSync(1); require('fs').closeSync(2)",
	}
	childCode := map[string]string{
		"python":     "import subprocess\nsubprocess.run(['sh', '-c', 'echo child-out; echo child-err >&2'])\nNone",
		"javascript": "require('child_process').execSync('echo child-out; echo child-err >&2', {stdio: 'inherit'}); undefined",
	}
	for _, kc := range kernelCases {
		t.Run(kc.lang, func(t *testing.T) {
			k := kc.start(t, false)
			runWithin(t, k, "kept = 41", 30*time.Second)
			runWithin(t, k, closeCode[kc.lang], 15*time.Second)
			start := time.Now()
			for range 5 {
				if got := results(runWithin(t, k, "kept + 1", 15*time.Second)); len(got) != 1 || got[0] != "42" {
					t.Fatalf("kept + 1 = %q", got)
				}
			}
			// A hang detector only: before the fix each run waited 0.5 s for its markers.
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("5 runs after closing fds 1 and 2 took %s", d)
			}
			evs := runWithin(t, k, childCode[kc.lang], 15*time.Second)
			if e := errorEvents(evs); len(e) != 0 {
				t.Fatalf("child run: %+v", e)
			}
			if out, errOut := text(evs, EventStdout), text(evs, EventStderr); !strings.Contains(out, "child-out") || !strings.Contains(errOut, "child-err") {
				t.Errorf("child output after fds 1 and 2 were restored: stdout %q, stderr %q", out, errOut)
			}
		})
	}
}

// TestManagerCreateReservesSlots: concurrent creates never start more kernels than the limit;
// the creates past it fail at once with CONTEXT_LIMIT_EXCEEDED, while the others are still
// starting.
func TestManagerCreateReservesSlots(t *testing.T) {
	const max, creates = 32, 100
	m := NewManager(Config{MaxContexts: max, PoolSize: -1})
	defer m.Close()
	f := &fakeFactory{}
	release := make(chan struct{})
	starting := make(chan struct{}, creates)
	m.Register("fake", func(ctx context.Context, cwd string, env map[string]string) (Kernel, error) {
		starting <- struct{}{}
		<-release
		return f.start(ctx, cwd, env)
	})
	type result struct {
		err error
	}
	out := make(chan result, creates)
	for range creates {
		go func() {
			_, err := m.Create(context.Background(), "fake", "", nil)
			out <- result{err}
		}()
	}
	// The creates past the limit end while max starts are blocked.
	for i := range creates - max {
		select {
		case r := <-out:
			if errdefs.CodeOf(r.err) != errdefs.CodeContextLimit {
				t.Fatalf("create %d past the limit: %v", i, r.err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d creates failed at once; want %d", i, creates-max)
		}
	}
	close(release)
	for range max {
		if r := <-out; r.err != nil {
			t.Errorf("create within the limit: %v", r.err)
		}
	}
	if n := len(starting); n != max {
		t.Errorf("%d kernel starts, want %d", n, max)
	}
	if n := f.started.Load(); n != max {
		t.Errorf("started %d kernels, want %d", n, max)
	}
	if n := len(m.List()); n != max {
		t.Errorf("%d contexts, want %d", n, max)
	}
}

// TestManagerCreateFailureReleasesSlot: a create whose start fails frees its slot.
func TestManagerCreateFailureReleasesSlot(t *testing.T) {
	m := NewManager(Config{MaxContexts: 1, PoolSize: -1})
	defer m.Close()
	f := &fakeFactory{}
	fail := true
	m.Register("fake", func(ctx context.Context, cwd string, env map[string]string) (Kernel, error) {
		if fail {
			return nil, errdefs.New(errdefs.CodeInterpreterStartTimeout, "slow")
		}
		return f.start(ctx, cwd, env)
	})
	for range 3 {
		if _, err := m.Create(context.Background(), "fake", "", nil); errdefs.CodeOf(err) != errdefs.CodeInterpreterStartTimeout {
			t.Fatalf("failing create: %v", err)
		}
	}
	fail = false
	if _, err := m.Create(context.Background(), "fake", "", nil); err != nil {
		t.Fatalf("create after failures: %v", err)
	}
	if _, err := m.Create(context.Background(), "fake", "", nil); errdefs.CodeOf(err) != errdefs.CodeContextLimit {
		t.Fatalf("create past the limit: %v", err)
	}
}

// TestStartTimeoutCode: a driver that never says ready fails with INTERPRETER_START_TIMEOUT,
// not INTERPRETER_NOT_AVAILABLE, and its process is gone.
func TestStartTimeoutCode(t *testing.T) {
	spec := procSpec{
		lang:         "sleep",
		argv:         []string{"/bin/sleep", "60"},
		dir:          t.TempDir(),
		startTimeout: 300 * time.Millisecond,
		startErr:     func(s string) error { return errors.New(s) },
	}
	_, err := startProc(context.Background(), spec, nil, slog.Default())
	if errdefs.CodeOf(err) != errdefs.CodeInterpreterStartTimeout {
		t.Fatalf("start of a silent driver: %v (code %s)", err, errdefs.CodeOf(err))
	}
}
