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

// TestCodePython runs the Python requirements of the code interpreter issue through hutchd.
func TestCodePython(t *testing.T) {
	requireEnv(t)
	parallel(t)
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
		checkStreamed(t, sb, cc.ID, "import time\nfor i in range(4):\n    print('tick', i)\n    time.sleep(0.4)")
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
		checkTimeoutKeepsState(t, sb, cc.ID, "while True: pass", "x", "41")
	})

	t.Run("interrupt", func(t *testing.T) {
		checkInterruptKeepsState(t, sb, cc.ID, "import time\ntime.sleep(120)", "KeyboardInterrupt", "x", "41")
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
// interpreter is left behind (beyond the pool's one pre-started kernel); each run starts a
// child process too: deleting the context kills the interpreter's tree.
func TestCodeLifecycleLeavesNoProcess(t *testing.T) {
	requireEnv(t)
	parallel(t)
	sb := sandbox(t, "e2e-code-cycles", nil)
	checkCyclesLeaveNoProcess(t, sb, client.LanguagePython, "python3", "import subprocess\np = subprocess.Popen(['sleep', '600'])")
}
