package interp

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// startJSKernel starts a real node kernel (skipping when node is missing) and closes it at the
// end of the test.
func startJSKernel(t *testing.T, ts bool) *jsKernel {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := NewJavaScriptFactory(JSConfig{Workdir: t.TempDir(), Env: os.Environ()})
	if ts {
		f = NewTypeScriptFactory(JSConfig{Workdir: t.TempDir(), Env: os.Environ()})
	}
	k, err := f(ctx, "", nil)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		if err := k.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return k.(*jsKernel)
}

// jsRun runs code and returns its events (the Manager's execution_complete not included).
func jsRun(t *testing.T, k Kernel, code string) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		mu  sync.Mutex
		evs []Event
	)
	if _, err := k.Run(ctx, code, func(ev Event) { mu.Lock(); evs = append(evs, ev); mu.Unlock() }); err != nil {
		t.Fatalf("run %q: %v", code, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return evs
}

// resultText returns the text/plain of the only result, failing on errors.
func resultText(t *testing.T, evs []Event) string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		switch ev.Type {
		case EventError:
			t.Fatalf("unexpected error %s: %s\n%s", ev.Name, ev.Value, strings.Join(ev.Traceback, "\n"))
		case EventResult:
			out = append(out, ev.Data["text/plain"].(string))
		}
	}
	if len(out) != 1 {
		t.Fatalf("want one result, got %d: %+v", len(out), evs)
	}
	return out[0]
}

func errorOf(evs []Event) *Event {
	for i := range evs {
		if evs[i].Type == EventError {
			return &evs[i]
		}
	}
	return nil
}

func TestJSStateAcrossRuns(t *testing.T) {
	k := startJSKernel(t, false)
	steps := []struct{ code, want string }{
		{"const x = 41\nlet y = 1\nfunction inc(v) { return v + y }\nclass P { constructor(v) { this.v = v } }", ""},
		{"inc(x)", "42"},
		{"new P(3).v", "3"},
		{"const x = 'again'; x", "'again'"}, // a cell can be re-run: declarations may repeat
		{"class P { get w() { return 7 } }\nnew P().w", "7"},
		{"const {a, b: [c = 5]} = {a: 1, b: []}\na + c", "6"},
		{"if (true) { 'block' }", "'block'"},
		{"let o = {\n  k: 1\n}\no", "{ k: 1 }"},
		{"const s = `a${1 +\n 2}b`; s", "'a3b'"}, // no name is taken by the driver
		{"{ a: 1 }", "{ a: 1 }"},                 // an object literal, as in node's REPL
		{"{ let blockScoped = 2; blockScoped * 2 }", "4"},
		{"// a comment after the value\n[1, 2].map(v => v * 2) // twice", "[ 2, 4 ]"},
	}
	for _, s := range steps {
		evs := jsRun(t, k, s.code)
		if s.want == "" {
			if e := errorOf(evs); e != nil {
				t.Fatalf("%q: %s: %s", s.code, e.Name, e.Value)
			}
			continue
		}
		if got := resultText(t, evs); got != s.want {
			t.Errorf("%q = %s, want %s", s.code, got, s.want)
		}
	}
}

func TestJSResults(t *testing.T) {
	k := startJSKernel(t, false)
	evs := jsRun(t, k, "({a: 1, list: [1, 2, 'x'], nested: {ok: true}})")
	var res *Event
	for i := range evs {
		if evs[i].Type == EventResult {
			res = &evs[i]
		}
	}
	if res == nil {
		t.Fatalf("no result: %+v", evs)
	}
	j, ok := res.Data["application/json"].(map[string]any)
	if !ok || j["a"] != float64(1) || len(j["list"].([]any)) != 3 {
		t.Errorf("application/json = %#v", res.Data["application/json"])
	}
	if !strings.Contains(res.Data["text/plain"].(string), "nested: { ok: true }") {
		t.Errorf("text/plain = %q", res.Data["text/plain"])
	}
	if res.ExecutionCount != 1 {
		t.Errorf("execution count = %d, want 1", res.ExecutionCount)
	}
	for _, code := range []string{"undefined", "let q = 1", "console.log('x')"} {
		for _, ev := range jsRun(t, k, code) {
			if ev.Type == EventResult || ev.Type == EventError {
				t.Errorf("%q: unexpected %s event %+v", code, ev.Type, ev)
			}
		}
	}
	// Only plain objects and arrays are JSON: a Map's JSON would be {}.
	for _, ev := range jsRun(t, k, "new Map([[1, 'a']])") {
		if ev.Type == EventResult {
			if _, ok := ev.Data["application/json"]; ok || ev.Data["text/plain"] != "Map(1) { 1 => 'a' }" {
				t.Errorf("Map result = %v", ev.Data)
			}
		}
	}
	// A circular object still has a text/plain.
	if got := resultText(t, jsRun(t, k, "const c = {}; c.c = c; c")); !strings.Contains(got, "Circular") {
		t.Errorf("circular = %q", got)
	}
}

func TestJSTopLevelAwait(t *testing.T) {
	k := startJSKernel(t, false)
	if got := resultText(t, jsRun(t, k, "const v = await new Promise(r => setTimeout(() => r(20), 20))\nclass K { twice() { return v * 2 } }\nfunction plus(n) { return v + n }\nnew K().twice() + 2")); got != "42" {
		t.Errorf("got %s, want 42", got)
	}
	// Declarations made in an await run persist, and can be declared again.
	if got := resultText(t, jsRun(t, k, "plus(1) + new K().twice()")); got != "61" {
		t.Errorf("got %s, want 61", got)
	}
	if got := resultText(t, jsRun(t, k, "let v = await Promise.resolve('again'); v")); got != "'again'" {
		t.Errorf("got %s", got)
	}
	// A rejected await is the run's error.
	e := errorOf(jsRun(t, k, "await Promise.reject(new RangeError('nope'))"))
	if e == nil || e.Name != "RangeError" || e.Value != "nope" {
		t.Errorf("error = %+v", e)
	}
}

func TestJSConsoleStreams(t *testing.T) {
	k := startJSKernel(t, false)
	var (
		mu    sync.Mutex
		evs   []Event
		times []time.Time
	)
	code := "for (let i = 0; i < 3; i++) { console.log('line', i); await new Promise(r => setTimeout(r, 150)) }\nconsole.error('bad'); process.stdout.write('raw\\n'); 'end'"
	start := time.Now()
	if _, err := k.Run(context.Background(), code, func(ev Event) {
		mu.Lock()
		defer mu.Unlock()
		evs = append(evs, ev)
		times = append(times, time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.Type+":"+strings.TrimSpace(ev.Text))
	}
	want := []string{"stdout:line 0", "stdout:line 1", "stdout:line 2", "stderr:bad", "stdout:raw", "result:"}
	if strings.Join(kinds, "|") != strings.Join(want, "|") {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	// The first line arrived while the code was still sleeping (streamed, not buffered).
	if first, total := times[0].Sub(start), times[len(times)-1].Sub(start); first > total-200*time.Millisecond {
		t.Errorf("first chunk at %s, last event at %s: output was not streamed", first, total)
	}
	// Output of a child process (fd 1 of node) reaches the run too.
	found := false
	for _, ev := range jsRun(t, k, "require('child_process').execSync('echo from-child', {stdio: 'inherit'}); 1") {
		if ev.Type == EventStdout && strings.Contains(ev.Text, "from-child") {
			found = true
		}
	}
	if !found {
		t.Error("child output missing")
	}
}

func TestJSErrors(t *testing.T) {
	k := startJSKernel(t, false)
	tests := []struct {
		code, name, value, inTrace string
	}{
		{"function boom() { throw new TypeError('bad thing') }\nboom()", "TypeError", "bad thing", "at boom (<cell 1>:1:"},
		{"let = ;", "SyntaxError", "", "<cell 2>"},
		{"undefinedVariable + 1", "ReferenceError", "undefinedVariable is not defined", "<cell 3>"},
		{"throw 'plain'", "Error", "Uncaught 'plain'", ""},
		{"class MyErr extends Error { constructor(m) { super(m); this.name = 'MyErr' } }\nthrow new MyErr('custom')", "MyErr", "custom", "<cell 5>"},
	}
	for _, tc := range tests {
		e := errorOf(jsRun(t, k, tc.code))
		if e == nil {
			t.Errorf("%q: no error", tc.code)
			continue
		}
		trace := strings.Join(e.Traceback, "\n")
		if e.Name != tc.name || (tc.value != "" && e.Value != tc.value) || !strings.Contains(trace, tc.inTrace) {
			t.Errorf("%q: got %s: %s\n%s", tc.code, e.Name, e.Value, trace)
		}
		if strings.Contains(trace, "hutch-js-driver") || strings.Contains(trace, "node:vm") {
			t.Errorf("%q: driver frames in the traceback:\n%s", tc.code, trace)
		}
	}
	// The kernel still works after errors.
	if got := resultText(t, jsRun(t, k, "1 + 1")); got != "2" {
		t.Errorf("after errors: %s", got)
	}
}

func TestTSKernel(t *testing.T) {
	k := startJSKernel(t, true)
	steps := []struct{ code, want string }{
		{"interface Point { x: number; y: number }\nenum Color { Red, Green = 'green' }\nfunction first<T>(xs: T[]): T { return xs[0] }\nconst p: Point = { x: 1, y: 2 }", ""},
		{"first<number>([p.x + p.y, 9])", "3"},
		{"Color.Green + ':' + Color[Color.Red]", "'green:Red'"},
		{"const n: number = await Promise.resolve<number>(5)\nclass Box<T> { constructor(public v: T) {} }\nnew Box<number>(n).v", "5"},
		{"import { join } from 'path'\njoin('a', 'b')", "'a/b'"},
	}
	for _, s := range steps {
		evs := jsRun(t, k, s.code)
		if s.want == "" {
			if e := errorOf(evs); e != nil {
				t.Fatalf("%q: %s: %s", s.code, e.Name, e.Value)
			}
			continue
		}
		if got := resultText(t, evs); got != s.want {
			t.Errorf("%q = %s, want %s", s.code, got, s.want)
		}
	}
	e := errorOf(jsRun(t, k, "const x: number = ;"))
	if e == nil || e.Name != "SyntaxError" || !strings.Contains(e.Value, "Unexpected") || len(e.Traceback) == 0 || !strings.Contains(e.Traceback[0], "cell.ts:1:") {
		t.Errorf("compile error = %+v", e)
	}
	n, err := k.Run(context.Background(), "1", func(Event) {})
	if err != nil || n != 7 {
		t.Errorf("count after a compile error = %d, %v; want 7", n, err)
	}
}

func TestJSInterrupt(t *testing.T) {
	k := startJSKernel(t, false)
	jsRun(t, k, "const kept = 'still here'")
	for _, code := range []string{"while (true) {}", "await new Promise(() => {})"} {
		var e *Event
		done := make(chan struct{})
		go func() {
			defer close(done)
			evs, mu := []Event(nil), sync.Mutex{}
			if _, err := k.Run(context.Background(), code, func(ev Event) { mu.Lock(); evs = append(evs, ev); mu.Unlock() }); err != nil {
				t.Errorf("run: %v", err)
			}
			e = errorOf(evs)
		}()
		time.Sleep(300 * time.Millisecond)
		if err := k.Interrupt(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%q did not stop after an interrupt", code)
		}
		if e == nil || e.Name != "InterruptError" {
			t.Errorf("%q: error = %+v", code, e)
		}
		// The context keeps its state.
		if got := resultText(t, jsRun(t, k, "kept")); got != "'still here'" {
			t.Errorf("after interrupting %q: %s", code, got)
		}
	}
	if k.Exited() {
		t.Error("kernel exited")
	}
}

// TestJSManagerTimeout runs through the Manager: a timed-out synchronous loop keeps the state;
// a loop the interrupt cannot reach (in a timer callback) gets the kernel replaced.
func TestJSManagerTimeout(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	m := NewManager(Config{InterruptGrace: time.Second})
	defer m.Close()
	m.Register("javascript", NewJavaScriptFactory(JSConfig{Workdir: t.TempDir(), Env: os.Environ()}))
	ctx := context.Background()
	c, err := m.Create(ctx, "javascript", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	collect := func(code string, timeout time.Duration) []Event {
		var evs []Event
		if err := m.Run(ctx, c.ID, code, timeout, func(ev Event) { evs = append(evs, ev) }); err != nil {
			t.Fatal(err)
		}
		return evs
	}
	collect("const kept = 1", 0)
	e := errorOf(collect("while (true) {}", time.Second))
	if e == nil || e.Name != "TimeoutError" {
		t.Fatalf("timeout error = %+v", e)
	}
	if got := resultText(t, collect("kept + 1", 0)); got != "2" {
		t.Errorf("after timeout: %s", got)
	}
	e = errorOf(collect("setTimeout(() => { while (true) {} }, 0); await new Promise(r => setTimeout(r, 50))", time.Second))
	if e == nil || e.Name != "TimeoutError" || !strings.Contains(e.Value, "state is lost") {
		t.Fatalf("blocked loop error = %+v", e)
	}
	if e := errorOf(collect("typeof kept", 0)); e != nil {
		t.Fatalf("restarted context: %+v", e)
	}
	if got := resultText(t, collect("typeof kept", 0)); got != "'undefined'" {
		t.Errorf("restarted context still has kept: %s", got)
	}
}

func TestJSKernelsIsolated(t *testing.T) {
	a := startJSKernel(t, false)
	b := startJSKernel(t, false)
	jsRun(t, a, "const secret = 'a'; globalThis.g = 1")
	if got := resultText(t, jsRun(t, b, "typeof secret + typeof g")); got != "'undefinedundefined'" {
		t.Errorf("b sees a's variables: %s", got)
	}
}

func TestJSCwdEnv(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/mod.js", []byte("module.exports = 'local module'"), 0o644); err != nil {
		t.Fatal(err)
	}
	k, err := NewJavaScriptFactory(JSConfig{Workdir: t.TempDir(), Env: os.Environ()})(context.Background(), dir, map[string]string{"HUTCH_TEST_VAR": "v1"})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if got := resultText(t, jsRun(t, k, "[process.cwd(), process.env.HUTCH_TEST_VAR, require('./mod.js'), process.env.HUTCH_JS_DRIVER]")); got != "[ '"+dir+"', 'v1', 'local module', undefined ]" {
		t.Errorf("got %s", got)
	}
	// Configure (used by the pool) moves cwd and adds env.
	dir2 := t.TempDir()
	if err := k.(Configurer).Configure(context.Background(), dir2, map[string]string{"HUTCH_TEST_VAR": "v2"}); err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, jsRun(t, k, "process.cwd() + ' ' + process.env.HUTCH_TEST_VAR")); got != "'"+dir2+" v2'" {
		t.Errorf("after configure: %s", got)
	}
	if err := k.(Configurer).Configure(context.Background(), "/nonexistent-dir", nil); err == nil {
		t.Error("configure to a missing dir succeeded")
	}
}

// TestJSKernelExit: code that ends node makes Run fail (the Manager then restarts the kernel).
func TestJSKernelExit(t *testing.T) {
	k := startJSKernel(t, false)
	if _, err := k.Run(context.Background(), "process.exit(3)", func(Event) {}); err == nil {
		t.Fatal("run of process.exit succeeded")
	}
	select {
	case <-k.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the kernel did not exit")
	}
	if !k.Exited() {
		t.Error("Exited() = false")
	}
}

// Acceptance case C2 for JavaScript: a missing node fails the create at once, naming it.
func TestJSMissingInterpreter(t *testing.T) {
	start := time.Now()
	_, err := NewJavaScriptFactory(JSConfig{Node: "/nonexistent/node"})(context.Background(), t.TempDir(), nil)
	if !errdefs.IsCode(err, errdefs.CodeInterpreterMissing) || !strings.Contains(err.Error(), "node") {
		t.Fatalf("missing node: %v; want INTERPRETER_NOT_AVAILABLE naming node", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusal took %v, want at once", d)
	}
}
