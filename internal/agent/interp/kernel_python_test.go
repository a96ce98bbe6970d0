package interp

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

// needIPython skips unless python3 with IPython is installed.
func needIPython(t *testing.T) {
	t.Helper()
	if err := exec.Command("python3", "-c", "import IPython").Run(); err != nil {
		t.Skip("python3 with IPython is not installed")
	}
}

// collect runs code and returns its events.
func collect(t *testing.T, k Kernel, code string) ([]Event, int) {
	t.Helper()
	var mu sync.Mutex
	var evs []Event
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := k.Run(ctx, code, func(e Event) { mu.Lock(); evs = append(evs, e); mu.Unlock() })
	if err != nil {
		t.Fatalf("Run(%q): %v", code, err)
	}
	return evs, n
}

func text(evs []Event, typ string) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == typ {
			b.WriteString(e.Text)
		}
	}
	return b.String()
}

func newPython(t *testing.T, cwd string, env map[string]string) Kernel {
	t.Helper()
	f := NewPythonFactory(PythonConfig{Workdir: t.TempDir(), Env: os.Environ()})
	k, err := f(context.Background(), cwd, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

func TestPythonKernel(t *testing.T) {
	needIPython(t)
	dir := t.TempDir()
	k := newPython(t, dir, map[string]string{"HUTCH_T": "v1"})

	if evs, _ := collect(t, k, "x = 41"); len(evs) != 0 {
		t.Fatalf("assignment gave events %+v", evs)
	}
	evs, n := collect(t, k, "print('hi')\nx + 1")
	if n != 2 || text(evs, EventStdout) != "hi\n" {
		t.Fatalf("count %d, events %+v", n, evs)
	}
	if r := evs[len(evs)-1]; r.Type != EventResult || r.Data["text/plain"] != "42" || r.ExecutionCount != 2 {
		t.Fatalf("result %+v", r)
	}
	evs, _ = collect(t, k, "{'a': [1, 2]}")
	if j, ok := evs[0].Data["application/json"].(map[string]any); !ok || len(j["a"].([]any)) != 2 {
		t.Fatalf("json result %+v", evs)
	}
	evs, _ = collect(t, k, "from IPython.display import display, HTML\ndisplay(HTML('<b>b</b>'))")
	if len(evs) != 1 || evs[0].Data["text/html"] != "<b>b</b>" {
		t.Fatalf("display: %+v", evs)
	}
	evs, _ = collect(t, k, "import os\nprint(os.getcwd(), os.environ['HUTCH_T'])\nos.system('echo child; echo childerr >&2')")
	// The print reaches the agent on the driver's event channel and the child's output on fd 1:
	// their order is not kept (docs/ARCHITECTURE.md, code contexts), only that both arrive.
	if got := strings.Split(strings.TrimSuffix(text(evs, EventStdout), "\n"), "\n"); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values([]string{dir + " v1", "child"}))) {
		t.Fatalf("stdout lines %q; want %q and %q in either order", got, dir+" v1", "child")
	}
	if got := text(evs, EventStderr); got != "childerr\n" {
		t.Fatalf("stderr %q", got)
	}
	evs, _ = collect(t, k, "import os\n(os.nice(0), open('/proc/self/oom_score_adj').read().strip())")
	if got := evs[0].Data["text/plain"]; got != "(19, '500')" {
		t.Fatalf("nice and oom_score_adj: %v", got)
	}
	evs, _ = collect(t, k, "print('a' * 200000, end='')")
	if got := text(evs, EventStdout); len(got) != 200000 || len(evs) < 4 {
		t.Fatalf("big print: %d bytes in %d events", len(got), len(evs))
	}
	evs, _ = collect(t, k, "def f():\n    raise ValueError('bad')\nf()")
	e := evs[len(evs)-1]
	if e.Type != EventError || e.Name != "ValueError" || e.Value != "bad" || !strings.Contains(strings.Join(e.Traceback, "\n"), "raise ValueError") {
		t.Fatalf("error %+v", e)
	}
	for _, l := range e.Traceback {
		if strings.Contains(l, "\x1b[") {
			t.Fatalf("ANSI in traceback: %q", l)
		}
	}
	evs, _ = collect(t, k, "def g(:")
	if e := evs[len(evs)-1]; e.Name != "SyntaxError" {
		t.Fatalf("syntax error %+v", e)
	}
	if evs, _ := collect(t, k, "import sys\nsys.stdout.write('ü€'*3)\nx"); text(evs, EventStdout) != "ü€ü€ü€" || evs[len(evs)-1].Data["text/plain"] != "41" {
		t.Fatalf("unicode / state %+v", evs)
	}
}

func TestPythonKernelInterrupt(t *testing.T) {
	needIPython(t)
	k := newPython(t, "", nil)
	collect(t, k, "y = 7")
	done := make(chan []Event)
	go func() {
		evs, _ := collect(t, k, "import time\nprint('start', flush=True)\ntime.sleep(120)")
		done <- evs
	}()
	var evs []Event
	// No interval: each round waits up to 200 ms for the run to end after its interrupt (an
	// interrupt before the run started does nothing, so the next round sends another).
	if !testutil.Poll(t, 0, 30*time.Second, func() bool {
		if err := k.Interrupt(); err != nil {
			t.Fatal(err)
		}
		select {
		case evs = <-done:
			return true
		case <-time.After(200 * time.Millisecond):
			return false
		}
	}) {
		t.Fatal("the run did not stop")
	}
	if e := evs[len(evs)-1]; e.Type != EventError || e.Name != "KeyboardInterrupt" {
		t.Fatalf("events %+v", evs)
	}
	if evs, _ := collect(t, k, "y"); evs[0].Data["text/plain"] != "7" {
		t.Fatalf("state lost: %+v", evs)
	}
	// An interrupt between runs changes nothing.
	if err := k.Interrupt(); err != nil {
		t.Fatal(err)
	}
	if evs, _ := collect(t, k, "y + 1"); evs[0].Data["text/plain"] != "8" {
		t.Fatalf("after idle interrupt: %+v", evs)
	}
}

func TestPythonKernelCloseKillsTree(t *testing.T) {
	needIPython(t)
	k := newPython(t, "", nil)
	pidFile := filepath.Join(t.TempDir(), "pid")
	collect(t, k, "import subprocess\np = subprocess.Popen(['sleep', '300'])\nopen('"+pidFile+"', 'w').write(str(p.pid))")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if !k.Exited() {
		t.Fatal("kernel not exited after Close")
	}
	if !testutil.Poll(t, 50*time.Millisecond, 10*time.Second, func() bool {
		st, err := os.ReadFile("/proc/" + strings.TrimSpace(string(b)) + "/stat")
		return err != nil || strings.Contains(string(st), ") Z ")
	}) {
		t.Fatalf("child %s survived Close", b)
	}
	if _, err := k.Run(context.Background(), "1", func(Event) {}); err == nil {
		t.Fatal("Run on a closed kernel succeeded")
	}
}

func TestPythonKernelExitDuringRun(t *testing.T) {
	needIPython(t)
	k := newPython(t, "", nil)
	_, err := k.Run(context.Background(), "import os\nos._exit(3)", func(Event) {})
	if err == nil {
		t.Fatal("no error from a run that killed the interpreter")
	}
	if !testutil.Poll(t, 20*time.Millisecond, 10*time.Second, k.Exited) {
		t.Fatal("Exited false")
	}
}

func TestPythonFactoryErrors(t *testing.T) {
	needIPython(t)
	ctx := context.Background()
	tests := []struct {
		name string
		cfg  PythonConfig
		cwd  string
		env  map[string]string
		code errdefs.Code
	}{
		{"missing interpreter", PythonConfig{Python: "/nonexistent/python3"}, "", nil, errdefs.CodeInterpreterMissing},
		{"missing IPython", PythonConfig{Env: []string{"PYTHONPATH=" + fakeIPython(t)}}, "", nil, errdefs.CodeInterpreterMissing},
		{"bad cwd", PythonConfig{}, "/nonexistent-dir", nil, errdefs.CodeInvalidPath},
		{"bad env", PythonConfig{}, "", map[string]string{"A=B": "x"}, errdefs.CodeInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Workdir = t.TempDir()
			k, err := NewPythonFactory(tt.cfg)(ctx, tt.cwd, tt.env)
			if err == nil {
				k.Close()
				t.Fatal("no error")
			}
			var e *errdefs.Error
			if !errors.As(err, &e) || e.Code != tt.code {
				t.Fatalf("error %v, want code %s", err, tt.code)
			}
			if tt.code == errdefs.CodeInterpreterMissing && !strings.Contains(strings.ToLower(err.Error()), "python") {
				t.Fatalf("error does not name the interpreter: %v", err)
			}
		})
	}
}

// fakeIPython returns a directory whose IPython package fails to import as a missing module.
func fakeIPython(t *testing.T) string {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "IPython", "core"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "IPython", "__init__.py"), []byte("raise ModuleNotFoundError(\"No module named 'IPython'\")\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPythonConfigure(t *testing.T) {
	needIPython(t)
	k := newPython(t, "", nil)
	dir := t.TempDir()
	if err := k.(Configurer).Configure(context.Background(), dir, map[string]string{"HUTCH_C": "c1"}); err != nil {
		t.Fatal(err)
	}
	evs, _ := collect(t, k, "import os\nos.getcwd() + ' ' + os.environ['HUTCH_C']")
	if got := evs[0].Data["text/plain"]; got != "'"+dir+" c1'" {
		t.Fatalf("got %v", got)
	}
	if err := k.(Configurer).Configure(context.Background(), "/nonexistent-dir", nil); errdefs.CodeOf(err) != errdefs.CodeInvalidPath {
		t.Fatalf("bad cwd: %v", err)
	}
}

// A NUL byte in code is an error of the run, not the kernel's death: the context keeps its
// state (a tester's finding).
func TestPythonNULKeepsState(t *testing.T) {
	k := newPython(t, "", nil)
	collect(t, k, "important = 42")
	evs, _ := collect(t, k, "x = \"\x00\"")
	hasErr := false
	for _, e := range evs {
		hasErr = hasErr || e.Type == EventError
	}
	if !hasErr || k.Exited() {
		t.Fatalf("NUL in code: events %+v, exited %v; want an error event and a live kernel", evs, k.Exited())
	}
	evs, _ = collect(t, k, "important")
	got := ""
	for _, e := range evs {
		if e.Type == EventResult {
			got, _ = e.Data["text/plain"].(string)
		}
	}
	if got != "42" {
		t.Fatalf("after the NUL run: %+v, want the state kept", evs)
	}
}
