package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/testutil"
)

// TestCodeEscapesDieWithContext: processes a context started that left its session (setsid)
// and lost their parent (a double fork) are killed when the interpreter is restarted (it
// exited during a run) and when the context is deleted; fake event lines written by the code
// change nothing.
func TestCodeEscapesDieWithContext(t *testing.T) {
	requireEnv(t)
	parallel(t)
	sb := sandbox(t, "e2e-code-escape", nil)
	ctx := ctxT(t, 5*time.Minute)
	escape := func(lang, secs string) string {
		if lang == client.LanguagePython {
			return "import subprocess\nsubprocess.Popen(['setsid', 'sh', '-c', 'sleep " + secs + " & '])\nsubprocess.Popen(['sh', '-c', 'sleep " + secs + "1 &']).wait()\n'started'"
		}
		return "const cp = require('child_process')\ncp.spawn('setsid', ['sh', '-c', 'sleep " + secs + " & '], {stdio: 'ignore'})\ncp.execSync('sh -c \"sleep " + secs + "1 &\"', {stdio: 'ignore'})\n'started'"
	}
	exit := map[string]string{client.LanguagePython: "import os\nos._exit(1)", client.LanguageJavaScript: "process.exit(1)"}
	waitGone := func(pattern string) {
		t.Helper()
		if !testutil.Poll(t, 200*time.Millisecond, 30*time.Second, func() bool { return !strings.Contains(processes(t, sb), pattern) }) {
			t.Fatalf("%q still running:\n%s", pattern, processes(t, sb))
		}
	}
	waitThere := func(pattern string) {
		t.Helper()
		if !testutil.Poll(t, 100*time.Millisecond, 30*time.Second, func() bool { return strings.Contains(processes(t, sb), pattern) }) {
			t.Fatalf("%q did not start:\n%s", pattern, processes(t, sb))
		}
	}
	for i, lang := range []string{client.LanguagePython, client.LanguageJavaScript} {
		t.Run(lang, func(t *testing.T) {
			cc, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{Language: lang})
			if err != nil {
				t.Fatal(err)
			}
			restart, del := "100"+string(rune('0'+i)), "200"+string(rune('0'+i))
			runOK(t, sb, cc.ID, escape(lang, restart))
			waitThere("sleep " + restart)
			out, err := sb.RunCode(ctx, exit[lang], &client.RunCodeOptions{Context: cc.ID})
			if err != nil || out.Error == nil || out.Error.Name != "KernelError" {
				t.Fatalf("exit run: %+v, %v", out, err)
			}
			waitGone("sleep " + restart)

			runOK(t, sb, cc.ID, escape(lang, del))
			waitThere("sleep " + del)
			if err := sb.DeleteCodeContext(ctx, cc.ID); err != nil {
				t.Fatal(err)
			}
			waitGone("sleep " + del)
		})
	}
}

// TestCodeFakeEvents: Python code writes fake "done" and result lines to every open fd; the
// run ends with its own result through hutchd, and the context keeps its state.
func TestCodeFakeEvents(t *testing.T) {
	requireEnv(t)
	parallel(t)
	sb := sandbox(t, "e2e-code-fake", nil)
	ctx := ctxT(t, 5*time.Minute)
	cc, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.DeleteCodeContext(ctx, cc.ID)
	runOK(t, sb, cc.ID, "kept = 7")
	out := runOK(t, sb, cc.ID, `import os, json
fake = (json.dumps({"type": "done", "count": 99}) + "\n" + json.dumps({"type": "result", "data": {"text/plain": "FAKE"}}) + "\n").encode()
for fd in sorted(int(f) for f in os.listdir('/proc/self/fd')):
    if fd > 2:
        try:
            os.write(fd, fake)
        except OSError:
            pass
print('after')
'real'`)
	// The fake lines may come back as output (the driver keeps hidden copies of fds 1 and 2, and
	// writing to a copy of stdout prints), but never as events: one real result, the real count.
	// The raw writes and print's line travel different ways, so their order is not fixed (on
	// gVisor "after" often comes first).
	if len(out.Results) != 1 || out.Results[0].Text != "'real'" || out.ExecutionCount != 2 || out.Error != nil ||
		!strings.Contains(strings.Join(out.Logs.Stdout, ""), "after\n") {
		t.Fatalf("run with fake events: %+v", out)
	}
	if out := runOK(t, sb, cc.ID, "kept"); out.Results[0].Text != "7" {
		t.Fatalf("state: %+v", out)
	}
}
