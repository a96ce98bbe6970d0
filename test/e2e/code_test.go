package e2e

import (
	"bytes"
	"image/png"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/cli"
)

// pythonCount returns how many python3 processes run in the sandbox.
func pythonCount(t *testing.T, sb *client.Sandbox) int {
	t.Helper()
	res, err := sb.Exec(ctxT(t, time.Minute), `cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^python3$' || true`, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("count %q: %v", res.Stdout, err)
	}
	return n
}

func runOK(t *testing.T, sb *client.Sandbox, cid, code string) *client.CodeExecution {
	t.Helper()
	out, err := sb.RunCode(ctxT(t, 2*time.Minute), code, &client.RunCodeOptions{Context: cid})
	if err != nil {
		t.Fatalf("RunCode(%q) = %v", code, err)
	}
	if out.Error != nil {
		t.Fatalf("RunCode(%q) raised %+v", code, out.Error)
	}
	return out
}

// TestCodePython runs the Python requirements of the code interpreter issue through hutchd.
func TestCodePython(t *testing.T) {
	requireEnv(t)
	sb := sandbox(t, "e2e-code-py", nil)
	ctx := ctxT(t, 10*time.Minute)
	cc, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{Language: client.LanguagePython, EnvVars: map[string]string{"HUTCH_CODE": "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	if cc.Language != "python" || cc.Cwd == "" || cc.ID == "" {
		t.Fatalf("context %+v", cc)
	}

	t.Run("state and text result", func(t *testing.T) {
		runOK(t, sb, cc.ID, "x = 41")
		out := runOK(t, sb, cc.ID, "x + 1")
		if len(out.Results) != 1 || out.Results[0].Text != "42" || out.ExecutionCount != 2 {
			t.Fatalf("x + 1 → %+v", out)
		}
		out = runOK(t, sb, cc.ID, "import os\nprint(os.environ['HUTCH_CODE'], os.getcwd())\n{'a': [1, 2]}")
		if got := strings.Join(out.Logs.Stdout, ""); got != "yes "+cc.Cwd+"\n" {
			t.Fatalf("stdout %q", got)
		}
		if m, ok := out.Results[0].JSON.(map[string]any); !ok || len(m["a"].([]any)) != 2 {
			t.Fatalf("json result %+v", out.Results)
		}
	})

	t.Run("matplotlib PNG", func(t *testing.T) {
		out := runOK(t, sb, cc.ID, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('t')")
		var pngs [][]byte
		for _, r := range out.Results {
			if len(r.PNG) > 0 {
				pngs = append(pngs, r.PNG)
			}
		}
		if len(pngs) != 1 {
			t.Fatalf("want one PNG, got results %d", len(out.Results))
		}
		img, err := png.Decode(bytes.NewReader(pngs[0]))
		if err != nil {
			t.Fatalf("decode PNG: %v", err)
		}
		if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
			t.Fatalf("PNG is %v", b)
		}
		// The figure was closed: the next run returns none.
		if out := runOK(t, sb, cc.ID, "1"); len(out.Results) != 1 || out.Results[0].PNG != nil {
			t.Fatalf("figure returned again: %+v", out.Results)
		}
	})

	t.Run("DataFrame HTML", func(t *testing.T) {
		out := runOK(t, sb, cc.ID, "import pandas as pd\npd.DataFrame({'col_a': [1, 2], 'col_b': ['x', 'y']})")
		r := out.Results[0]
		if !strings.Contains(r.HTML, "<table") || !strings.Contains(r.HTML, "col_a") || !strings.Contains(r.Text, "col_b") {
			t.Fatalf("DataFrame result %+v", r)
		}
	})

	t.Run("streaming", func(t *testing.T) {
		var times []time.Time
		var text strings.Builder
		code := "import time\nfor i in range(4):\n    print('tick', i)\n    time.sleep(0.4)"
		for ev, err := range sb.RunCodeStream(ctxT(t, time.Minute), code, &client.RunCodeOptions{Context: cc.ID}) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == client.CodeEventStdout {
				text.WriteString(ev.Text)
				if strings.HasSuffix(ev.Text, "\n") {
					times = append(times, time.Now())
				}
			}
			if ev.Type == client.CodeEventError {
				t.Fatalf("error %+v", ev.Error)
			}
		}
		if text.String() != "tick 0\ntick 1\ntick 2\ntick 3\n" || len(times) != 4 {
			t.Fatalf("stdout %q in %d lines", text.String(), len(times))
		}
		if spread := times[3].Sub(times[0]); spread < 800*time.Millisecond {
			t.Fatalf("the lines arrived together (spread %s): output was not streamed", spread)
		}
	})

	t.Run("exception", func(t *testing.T) {
		out, err := sb.RunCode(ctx, "def f():\n    raise ValueError('bad value')\nf()", &client.RunCodeOptions{Context: cc.ID})
		if err != nil {
			t.Fatal(err)
		}
		e := out.Error
		if e == nil || e.Name != "ValueError" || e.Value != "bad value" || !strings.Contains(strings.Join(e.Traceback, "\n"), "raise ValueError") {
			t.Fatalf("error %+v", e)
		}
		if strings.Contains(strings.Join(e.Traceback, ""), "\x1b[") {
			t.Fatal("ANSI escapes in the traceback")
		}
	})

	t.Run("wrong language", func(t *testing.T) {
		out, err := sb.RunCode(ctx, "const v = 1;", &client.RunCodeOptions{Context: cc.ID})
		if err != nil || out.Error == nil || out.Error.Name != "SyntaxError" {
			t.Fatalf("JavaScript in a Python context: %+v, %v", out, err)
		}
	})

	t.Run("timeout keeps state", func(t *testing.T) {
		start := time.Now()
		out, err := sb.RunCode(ctx, "while True: pass", &client.RunCodeOptions{Context: cc.ID, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if out.Error == nil || out.Error.Name != "TimeoutError" {
			t.Fatalf("timeout run %+v", out)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("the timeout took %s", d)
		}
		if out := runOK(t, sb, cc.ID, "x"); out.Results[0].Text != "41" {
			t.Fatalf("state lost: %+v", out)
		}
	})

	t.Run("interrupt", func(t *testing.T) {
		done := make(chan *client.CodeExecution, 1)
		go func() {
			out, _ := sb.RunCode(ctx, "import time\ntime.sleep(120)", &client.RunCodeOptions{Context: cc.ID})
			done <- out
		}()
		deadline := time.After(time.Minute)
		for {
			if err := sb.InterruptCode(ctx, cc.ID); err != nil {
				t.Fatal(err)
			}
			select {
			case out := <-done:
				if out == nil || out.Error == nil || out.Error.Name != "KeyboardInterrupt" {
					t.Fatalf("interrupted run %+v", out)
				}
				if out := runOK(t, sb, cc.ID, "x"); out.Results[0].Text != "41" {
					t.Fatalf("state lost: %+v", out)
				}
				return
			case <-time.After(300 * time.Millisecond):
			case <-deadline:
				t.Fatal("the run was not interrupted")
			}
		}
	})

	t.Run("contexts isolated and parallel", func(t *testing.T) {
		other, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.DeleteCodeContext(ctx, other.ID)
		out, err := sb.RunCode(ctx, "x", &client.RunCodeOptions{Context: other.ID})
		if err != nil || out.Error == nil || out.Error.Name != "NameError" {
			t.Fatalf("x in another context: %+v, %v", out, err)
		}
		// Two contexts run at once: their runs overlap in time (as the sandbox's clock says).
		var wg sync.WaitGroup
		spans := make([][2]float64, 2)
		for i, id := range []string{cc.ID, other.ID} {
			wg.Go(func() {
				out := runOK(t, sb, id, "import time\ns = time.time()\ntime.sleep(1.5)\nprint(s, time.time())")
				f := strings.Fields(strings.Join(out.Logs.Stdout, ""))
				spans[i][0], _ = strconv.ParseFloat(f[0], 64)
				spans[i][1], _ = strconv.ParseFloat(f[1], 64)
			})
		}
		wg.Wait()
		if !(spans[0][0] < spans[1][1] && spans[1][0] < spans[0][1]) {
			t.Fatalf("runs in two contexts did not overlap: %v", spans)
		}
		list, err := sb.ListCodeContexts(ctx)
		if err != nil || len(list) != 2 {
			t.Fatalf("list %+v, %v", list, err)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		_, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{Language: "cobol"})
		if !errdefs.IsCode(err, errdefs.CodeInvalidLanguage) {
			t.Fatalf("unknown language: %v", err)
		}
		_, err = sb.RunCode(ctx, "1", &client.RunCodeOptions{Language: "cobol"})
		if !errdefs.IsCode(err, errdefs.CodeInvalidLanguage) {
			t.Fatalf("run-code unknown language: %v", err)
		}
		_, err = sb.RunCode(ctx, "1", &client.RunCodeOptions{Context: "ctx-nope"})
		if !errdefs.IsCode(err, errdefs.CodeContextNotFound) {
			t.Fatalf("unknown context: %v", err)
		}
		for _, err := range sb.RunCodeStream(ctx, "1", &client.RunCodeOptions{Context: "ctx-nope"}) {
			if !errdefs.IsCode(err, errdefs.CodeContextNotFound) {
				t.Fatalf("unknown context (stream): %v", err)
			}
		}
		if err := sb.DeleteCodeContext(ctx, "ctx-nope"); !errdefs.IsCode(err, errdefs.CodeContextNotFound) {
			t.Fatalf("delete unknown context: %v", err)
		}
		if err := sb.InterruptCode(ctx, "ctx-nope"); !errdefs.IsCode(err, errdefs.CodeContextNotFound) {
			t.Fatalf("interrupt unknown context: %v", err)
		}
		_, err = sb.CreateCodeContext(ctx, client.CodeContextOptions{Cwd: "/no/such/dir"})
		if !errdefs.IsCode(err, errdefs.CodeInvalidPath) {
			t.Fatalf("bad cwd: %v", err)
		}
	})

	t.Run("run-code without a context", func(t *testing.T) {
		out, err := sb.RunCode(ctx, "6 * 7", &client.RunCodeOptions{Language: client.LanguagePython})
		if err != nil || out.Results[0].Text != "42" {
			t.Fatalf("run-code %+v, %v", out, err)
		}
	})

	t.Run("hutch run", func(t *testing.T) {
		dir := t.TempDir()
		env := func(k string) (string, bool) {
			switch k {
			case "HUTCH_URL":
				return d.URL(), true
			case "HUTCH_TOKEN":
				return d.Token, true
			}
			return "", false
		}
		code := "import matplotlib.pyplot as plt\nprint('out')\nplt.plot([1, 2])\nx * 2"
		var stdout, stderr bytes.Buffer
		rc := cli.Main(ctx, []string{"run", "e2e-code-py", "--context", cc.ID, "--out-dir", dir, "-"}, strings.NewReader(code), &stdout, &stderr, env)
		if rc != 0 {
			t.Fatalf("hutch run = %d, stderr %s", rc, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		// Figures are returned at the end of the run, after the other results.
		if len(lines) != 3 || lines[0] != "out" || lines[1] != "82" || !strings.HasPrefix(lines[2], "[image saved to "+dir) {
			t.Fatalf("hutch run stdout %q", stdout.String())
		}
		path := strings.TrimSuffix(strings.TrimPrefix(lines[2], "[image saved to "), "]")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(bytes.NewReader(b)); err != nil {
			t.Fatalf("saved image: %v", err)
		}
		stdout.Reset()
		stderr.Reset()
		rc = cli.Main(ctx, []string{"run", "e2e-code-py", "--lang", "python"}, strings.NewReader("1/0"), &stdout, &stderr, env)
		if rc != 1 || !strings.Contains(stderr.String(), "ZeroDivisionError") {
			t.Fatalf("hutch run 1/0 = %d, stderr %q", rc, stderr.String())
		}
	})

	if err := sb.DeleteCodeContext(ctx, cc.ID); err != nil {
		t.Fatal(err)
	}
}

// TestCodeLifecycleLeavesNoProcess runs 20 create/run/delete cycles and checks that no
// interpreter is left behind (beyond the pool's one pre-started kernel).
func TestCodeLifecycleLeavesNoProcess(t *testing.T) {
	requireEnv(t)
	sb := sandbox(t, "e2e-code-cycles", nil)
	ctx := ctxT(t, 10*time.Minute)
	for i := range 20 {
		cc, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{})
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		// A child process too: deleting the context kills the interpreter's tree.
		out := runOK(t, sb, cc.ID, "import subprocess\np = subprocess.Popen(['sleep', '600'])\n"+strconv.Itoa(i))
		if out.Results[0].Text != strconv.Itoa(i) {
			t.Fatalf("cycle %d: %+v", i, out)
		}
		if err := sb.DeleteCodeContext(ctx, cc.ID); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
	}
	list, err := sb.ListCodeContexts(ctx)
	if err != nil || len(list) != 0 {
		t.Fatalf("contexts left: %+v, %v", list, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := pythonCount(t, sb)
		ps := processes(t, sb)
		sleeps := strings.Count(ps, "sleep 600")
		if n <= 1 && sleeps == 0 { // the pool keeps one idle interpreter
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d python3 processes and %d sleeps left:\n%s", n, sleeps, ps)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
