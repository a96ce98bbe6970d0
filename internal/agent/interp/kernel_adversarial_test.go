package interp

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/agent/reaper"
	"github.com/hutchdev/hutch/internal/testutil"
)

// Findings of an adversarial tester: user code must not be able to desync a context, block
// its output reader, kill it with a large result, leave processes behind or crash the driver.

// testShimEnv makes the test binary act as hutch-init's `shim --fds 2 --` (see TestMain).
const testShimEnv = "HUTCH_INTERP_TEST_SHIM"

func TestMain(m *testing.M) {
	if os.Getenv(testShimEnv) == "1" {
		args := os.Args[1:]
		for i, a := range args {
			if a == "--" {
				args = args[i+1:]
				break
			}
		}
		os.Exit(reaper.Shim(args, 2))
	}
	os.Exit(m.Run())
}

// testShim returns the argv prefix that runs a kernel under the subreaper shim (this test
// binary, see TestMain), and the environment that selects it.
func testShim(t *testing.T) ([]string, []string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Skipf("no test binary path: %v", err)
	}
	return []string{self, "--"}, append(os.Environ(), testShimEnv+"=1")
}

// kernelCase starts one language's kernel, with or without the shim.
type kernelCase struct {
	lang  string
	start func(t *testing.T, shim bool) Kernel
}

var kernelCases = []kernelCase{
	{"python", func(t *testing.T, shim bool) Kernel {
		needIPython(t)
		cfg := PythonConfig{Workdir: t.TempDir(), Env: os.Environ()}
		if shim {
			cfg.Shim, cfg.Env = testShim(t)
		}
		return startKernel(t, NewPythonFactory(cfg))
	}},
	{"javascript", func(t *testing.T, shim bool) Kernel {
		if _, err := exec.LookPath("node"); err != nil {
			t.Skip("node is not installed")
		}
		cfg := JSConfig{Workdir: t.TempDir(), Env: os.Environ()}
		if shim {
			cfg.Shim, cfg.Env = testShim(t)
		}
		return startKernel(t, NewJavaScriptFactory(cfg))
	}},
}

func startKernel(t *testing.T, f KernelFactory) Kernel {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k, err := f(ctx, "", nil)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}

// runWithin runs code and fails the test (closing the kernel) when the run does not end within
// d: a desynced or blocked kernel never ends its run by itself.
func runWithin(t *testing.T, k Kernel, code string, d time.Duration) []Event {
	t.Helper()
	var (
		mu  sync.Mutex
		evs []Event
	)
	done := make(chan error, 1)
	go func() {
		_, err := k.Run(context.Background(), code, func(e Event) { mu.Lock(); evs = append(evs, e); mu.Unlock() })
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("Run(%.60q): %v (events %.2000v)", code, err, evs)
		}
	case <-time.After(d):
		_ = k.Close()
		t.Fatalf("Run(%.60q) did not end within %s", code, d)
	}
	mu.Lock()
	defer mu.Unlock()
	return evs
}

// results returns the text/plain of every result event.
func results(evs []Event) []string {
	var out []string
	for _, e := range evs {
		if e.Type == EventResult {
			s, _ := e.Data["text/plain"].(string)
			out = append(out, s)
		}
	}
	return out
}

// Finding 1: user code writes fake event lines (a "done", a result, half a line) to every
// open fd (node: every blocking one; garbage in libuv's own non-blocking pipes crashes node,
// which the Manager then restarts), and from a shell to fds 3 and 4. The run still ends with its own result and output,
// and the next run works.
func TestFakeEventLinesIgnored(t *testing.T) {
	codes := map[string]string{
		"python": `import os, json
fake = (json.dumps({"type": "done", "count": 99}) + "\n" + json.dumps({"type": "result", "data": {"text/plain": "FAKE"}, "count": 99}) + "\n").encode()
for part in (fake, b'{"type":"do'):
    for fd in sorted(int(f) for f in os.listdir('/proc/self/fd')):
        if fd > 2:
            try:
                os.write(fd, part)
            except OSError:
                pass
os.system("""printf '{"type":"done"}\\n' >&4 2>/dev/null; printf '{"type":"done"}\\n' >&3 2>/dev/null""")
print('after')
'real'`,
		"javascript": `const fs = require('fs');
const fake = JSON.stringify({type: 'done'}) + '\n' + JSON.stringify({type: 'result', data: {'text/plain': 'FAKE'}}) + '\n';
for (const part of [fake, '{"type":"do']) {
  for (const f of fs.readdirSync('/proc/self/fd')) {
    let flags = 0;
    try { flags = parseInt(/flags:\s*(\d+)/.exec(fs.readFileSync('/proc/self/fdinfo/' + f, 'utf8'))[1], 8) } catch (_) { continue }
    if (Number(f) > 2 && !(flags & 0o4000)) { try { fs.writeSync(Number(f), part) } catch (_) {} }
  }
}
require('child_process').execSync(` + "`printf '{\"type\":\"done\"}\\\\n' >&4 2>/dev/null; printf '{\"type\":\"done\"}\\\\n' >&3 2>/dev/null; true`" + `);
console.log('after');
'real'`,
	}
	for _, kc := range kernelCases {
		t.Run(kc.lang, func(t *testing.T) {
			k := kc.start(t, false)
			evs := runWithin(t, k, codes[kc.lang], time.Minute)
			if e := errorOf(evs); e != nil {
				t.Fatalf("error %s: %s\n%s", e.Name, e.Value, strings.Join(e.Traceback, "\n"))
			}
			if got := results(evs); len(got) != 1 || got[0] != "'real'" {
				t.Fatalf("results %q, want only 'real' (events %+v)", got, evs)
			}
			if got := text(evs, EventStdout); !strings.Contains(got, "after\n") {
				t.Fatalf("stdout %q lacks the run's own output", got)
			}
			if got := results(runWithin(t, k, "1 + 1", time.Minute)); len(got) != 1 || got[0] != "2" {
				t.Fatalf("next run: %q", got)
			}
		})
	}
}

// Finding 2: the end-of-run marker printed by user code to fd 1, 10,000 times, is plain
// output and blocks nothing.
func TestSyncMarkerFromUserIsOutput(t *testing.T) {
	const marker = "\x00\x1bhutch-sync"
	if !strings.Contains(pythonDriver, `\x00\x1bhutch-sync`) || !strings.Contains(jsDriver, `\x00\x1bhutch-sync`) {
		t.Fatal("the drivers no longer write the marker this test fakes")
	}
	variants := []string{marker + "\x00", marker + ":0123456789abcdef\x00"}
	codes := map[string]string{
		"python":     "import os\nfor m in (%q, %q):\n    for _ in range(10000):\n        os.write(1, m.encode())\n'done'",
		"javascript": "const fs = require('fs');\nfor (const m of [%q, %q]) for (let i = 0; i < 10000; i++) fs.writeSync(1, m);\n'done'",
	}
	for _, kc := range kernelCases {
		t.Run(kc.lang, func(t *testing.T) {
			k := kc.start(t, false)
			evs := runWithin(t, k, fmt.Sprintf(codes[kc.lang], variants[0], variants[1]), time.Minute)
			want := strings.Repeat(variants[0], 10000) + strings.Repeat(variants[1], 10000)
			if got := text(evs, EventStdout); got != want {
				t.Fatalf("stdout: %d bytes, want the %d bytes of markers", len(got), len(want))
			}
			if got := results(evs); len(got) != 1 || got[0] != "'done'" {
				t.Fatalf("results %q", got)
			}
			if got := results(runWithin(t, k, "1 + 1", time.Minute)); len(got) != 1 || got[0] != "2" {
				t.Fatalf("next run: %q", got)
			}
		})
	}
}

// Finding 3: a result (or error) larger than the event line limit is replaced by a notice; the
// context keeps its state.
func TestHugeResultKeepsContext(t *testing.T) {
	type step struct{ code, check string }
	steps := map[string][]step{
		"python": {
			{"s = 'x' * (70 << 20)\ns", "result-notice"},
			{"raise ValueError(s)", "error"},
			{"from IPython.display import display\ndisplay({'text/plain': s, 'text/html': 'ok'}, raw=True)", "result-notice"},
			{"len(s)", "73400320"},
		},
		"javascript": {
			{"const s = 'x'.repeat(70 << 20)\n;[s]", "stderr-notice"},
			{"throw new Error(s)", "error"},
			{"s.length", "73400320"},
		},
	}
	for _, kc := range kernelCases {
		t.Run(kc.lang, func(t *testing.T) {
			k := kc.start(t, false)
			for _, st := range steps[kc.lang] {
				evs := runWithin(t, k, st.code, 2*time.Minute)
				if k.Exited() {
					t.Fatalf("%.40q: the kernel exited", st.code)
				}
				e := errorOf(evs)
				switch st.check {
				case "error":
					if e == nil || e.Name == "" || len(e.Value) > 2<<20 || !strings.Contains(e.Value, "too large") {
						t.Fatalf("%.40q: error %.200v", st.code, e)
					}
					continue
				case "result-notice":
					got := results(evs)
					if e != nil || len(got) != 1 || !strings.Contains(got[0], "too large") || len(got[0]) > 1<<20 {
						t.Fatalf("%.40q: results %.300q, error %v", st.code, got, e)
					}
				case "stderr-notice":
					if e != nil || !strings.Contains(text(evs, EventStderr), "too large") {
						t.Fatalf("%.40q: stderr %.300q, error %v", st.code, text(evs, EventStderr), e)
					}
					for _, ev := range evs {
						if _, ok := ev.Data["application/json"]; ok {
							t.Fatalf("%.40q: the oversized JSON was sent", st.code)
						}
					}
				default:
					if got := results(evs); e != nil || len(got) != 1 || got[0] != st.check {
						t.Fatalf("%.40q: results %q, error %v", st.code, got, e)
					}
				}
			}
		})
	}
}

// Finding 4: processes that leave the kernel's session (setsid) and lose their parent (a
// double fork) die with the kernel, with and without the subreaper shim.
func TestCloseKillsEscapedProcesses(t *testing.T) {
	codes := map[string]string{
		"python":     "import subprocess\nsubprocess.Popen(['setsid', 'sh', '-c', 'sleep 1000 & echo $! > %s'])\n",
		"javascript": "require('child_process').spawn('setsid', ['sh', '-c', 'sleep 1000 & echo $! > %s'], {stdio: 'ignore'})\n",
	}
	for _, kc := range kernelCases {
		for _, shim := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/shim=%v", kc.lang, shim), func(t *testing.T) {
				k := kc.start(t, shim)
				pidFile := filepath.Join(t.TempDir(), "pid")
				runWithin(t, k, fmt.Sprintf(codes[kc.lang], pidFile), time.Minute)
				var pid int
				if !testutil.Poll(t, 20*time.Millisecond, 20*time.Second, func() bool {
					b, _ := os.ReadFile(pidFile)
					pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
					return pid != 0
				}) {
					t.Fatal("the escaped process did not start")
				}
				t.Cleanup(func() { _ = syscallKill(pid) })
				if err := k.Close(); err != nil {
					t.Fatal(err)
				}
				if !testutil.Poll(t, 50*time.Millisecond, 10*time.Second, func() bool { return !alive(pid) }) {
					t.Fatalf("the escaped sleep (pid %d) survived Close", pid)
				}
			})
		}
	}
}

// alive tells whether pid is a live process (not a zombie) running sleep.
func alive(pid int) bool {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && strings.Contains(string(st), "(sleep)") && !strings.Contains(string(st), ") Z ")
}

// Finding 5: exit(), quit() and sys.exit(n) end the run with a SystemExit error; the kernel
// keeps its state.
func TestPythonExitIsSystemExit(t *testing.T) {
	needIPython(t)
	k := newPython(t, "", nil)
	runWithin(t, k, "kept = 'yes'", time.Minute)
	for _, tt := range []struct{ code, value string }{
		{"exit()", ""}, {"quit()", ""}, {"import sys\nsys.exit(3)", "3"}, {"exit(4)", "4"}, {"raise SystemExit('bye')", "bye"},
	} {
		evs := runWithin(t, k, "print('before')\n"+tt.code, time.Minute)
		e := errorOf(evs)
		if e == nil || e.Name != "SystemExit" || e.Value != tt.value {
			t.Fatalf("%q: error %+v, want SystemExit %q", tt.code, e, tt.value)
		}
		if got := text(evs, EventStdout); got != "before\n" {
			t.Errorf("%q: stdout %q", tt.code, got)
		}
		if got := text(evs, EventStderr); got != "" {
			t.Errorf("%q: stderr %q, want none", tt.code, got)
		}
		if got := results(runWithin(t, k, "kept", time.Minute)); len(got) != 1 || got[0] != "'yes'" || k.Exited() {
			t.Fatalf("after %q: %q", tt.code, got)
		}
	}
}

// Finding 6: an exception in the display of the last expression (__repr__, _repr_html_, an
// exception whose __str__ fails, a BaseException) is the run's error; stdout is kept and the
// context lives.
func TestPythonDisplayErrors(t *testing.T) {
	needIPython(t)
	k := newPython(t, "", nil)
	runWithin(t, k, "kept = 'yes'\nclass B(BaseException):\n    def __str__(self): raise B()", time.Minute)
	for _, tt := range []struct{ code, name string }{
		{"class A:\n    def __repr__(self): raise ValueError('bad repr')\nA()", "ValueError"},
		{"class H:\n    def _repr_html_(self): raise ValueError('bad html')\nH()", "ValueError"},
		{"class R:\n    def __repr__(self): raise B()\nR()", "B"},
		{"raise B()", "B"},
		{"class E(Exception):\n    def __str__(self): raise B()\nraise E()", "E"},
		{"get_ipython().display_formatter.formatters['text/plain'].for_type(int, lambda o, p, c: 1 / 0)\n5", "ZeroDivisionError"},
	} {
		evs := runWithin(t, k, "print('out')\n"+tt.code, time.Minute)
		e := errorOf(evs)
		if e == nil || e.Name != tt.name || len(e.Traceback) == 0 {
			t.Fatalf("%q: error %+v, want %s", tt.code, e, tt.name)
		}
		if got := text(evs, EventStdout); got != "out\n" {
			t.Errorf("%q: stdout %q", tt.code, got)
		}
		if k.Exited() {
			t.Fatalf("%q: the kernel exited", tt.code)
		}
		if got := results(runWithin(t, k, "kept", time.Minute)); len(got) != 1 || got[0] != "'yes'" {
			t.Fatalf("after %q: %q", tt.code, got)
		}
	}
}

func syscallKill(pid int) error { return unix.Kill(pid, unix.SIGKILL) }
