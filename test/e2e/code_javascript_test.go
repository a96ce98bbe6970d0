package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// TestCodeJS runs the JavaScript and TypeScript requirements of the code interpreter issue
// through hutchd, on the image's node.
func TestCodeJS(t *testing.T) {
	requireEnv(t)
	parallel(t)
	sb := sandbox(t, "e2e-code-js", nil)
	ctx := ctxT(t, 10*time.Minute)
	cc, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{Language: client.LanguageJavaScript, EnvVars: map[string]string{"HUTCH_CODE": "js"}})
	if err != nil {
		t.Fatal(err)
	}
	if cc.Language != "javascript" || cc.ID == "" {
		t.Fatalf("context %+v", cc)
	}

	t.Run("state, await and results", func(t *testing.T) {
		runOK(t, sb, cc.ID, "const x = 41\nfunction inc(v) { return v + 1 }\nclass Counter { constructor() { this.n = 0 } }")
		out := runOK(t, sb, cc.ID, "inc(x)")
		if len(out.Results) != 1 || out.Results[0].Text != "42" || out.ExecutionCount != 2 {
			t.Fatalf("inc(x) → %+v", out)
		}
		out = runOK(t, sb, cc.ID, "const later = await new Promise(r => setTimeout(() => r(x * 2), 50))\nlater")
		if out.Results[0].Text != "82" {
			t.Fatalf("await → %+v", out)
		}
		out = runOK(t, sb, cc.ID, "console.log(process.env.HUTCH_CODE, process.cwd());\n({later, list: [1, 2], c: new Counter().n})")
		if got := strings.Join(out.Logs.Stdout, ""); got != "js "+cc.Cwd+"\n" {
			t.Fatalf("stdout %q", got)
		}
		m, ok := out.Results[0].JSON.(map[string]any)
		if !ok || m["later"] != float64(82) || len(m["list"].([]any)) != 2 {
			t.Fatalf("json result %+v", out.Results)
		}
		// A cell that declares the same names can run again.
		if out := runOK(t, sb, cc.ID, "const x = 1; x"); out.Results[0].Text != "1" {
			t.Fatalf("redeclared: %+v", out)
		}
	})

	t.Run("streaming", func(t *testing.T) {
		checkStreamed(t, sb, cc.ID, "for (let i = 0; i < 4; i++) { console.log('tick', i); await new Promise(r => setTimeout(r, 400)) }")
	})

	t.Run("thrown error", func(t *testing.T) {
		out, err := sb.RunCode(ctx, "function fail() { throw new TypeError('bad value') }\nfail()", &client.RunCodeOptions{Context: cc.ID})
		if err != nil {
			t.Fatal(err)
		}
		e := out.Error
		if e == nil || e.Name != "TypeError" || e.Value != "bad value" || !strings.Contains(strings.Join(e.Traceback, "\n"), "at fail (") {
			t.Fatalf("error %+v", e)
		}
	})

	t.Run("wrong language", func(t *testing.T) {
		out, err := sb.RunCode(ctx, "def f():\n    return 1", &client.RunCodeOptions{Context: cc.ID})
		if err != nil || out.Error == nil || out.Error.Name != "SyntaxError" {
			t.Fatalf("Python in a JavaScript context: %+v, %v", out, err)
		}
	})

	t.Run("timeout keeps state", func(t *testing.T) {
		checkTimeoutKeepsState(t, sb, cc.ID, "while (true) {}", "x", "1")
	})

	t.Run("interrupt", func(t *testing.T) {
		checkInterruptKeepsState(t, sb, cc.ID, "await new Promise(() => {})", "InterruptError", "x", "1")
	})

	t.Run("contexts isolated", func(t *testing.T) {
		other, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{Language: client.LanguageJavaScript})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.DeleteCodeContext(ctx, other.ID)
		out, err := sb.RunCode(ctx, "x", &client.RunCodeOptions{Context: other.ID})
		if err != nil || out.Error == nil || out.Error.Name != "ReferenceError" {
			t.Fatalf("x in another context: %+v, %v", out, err)
		}
	})

	t.Run("typescript", func(t *testing.T) {
		ts, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{Language: client.LanguageTypeScript})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.DeleteCodeContext(ctx, ts.ID)
		runOK(t, sb, ts.ID, "interface Point { x: number; y: number }\nenum Color { Red, Green }\nfunction first<T>(xs: T[]): T { return xs[0] }\nconst p: Point = { x: 1, y: 2 }")
		out := runOK(t, sb, ts.ID, "const n: number = await Promise.resolve(first<number>([p.x + p.y]));\n`${n} ${Color[Color.Green]}`")
		if out.Results[0].Text != "'3 Green'" {
			t.Fatalf("ts → %+v", out)
		}
		out, err = sb.RunCode(ctx, "const bad: number = ;", &client.RunCodeOptions{Context: ts.ID})
		if err != nil || out.Error == nil || out.Error.Name != "SyntaxError" || len(out.Error.Traceback) == 0 {
			t.Fatalf("compile error %+v, %v", out, err)
		}
		out, err = sb.RunCode(ctx, "[1, 2].map((v: number): number => v * 3)", &client.RunCodeOptions{Language: client.LanguageTypeScript})
		if err != nil || out.Error != nil || out.Results[0].Text != "[ 3, 6 ]" {
			t.Fatalf("run-code typescript %+v, %v", out, err)
		}
	})

	if err := sb.DeleteCodeContext(ctx, cc.ID); err != nil {
		t.Fatal(err)
	}
}

// TestCodeJSLifecycleLeavesNoProcess runs 20 create/run/delete cycles of JavaScript contexts
// and checks that no node process is left behind (beyond the pool's pre-started kernel).
func TestCodeJSLifecycleLeavesNoProcess(t *testing.T) {
	requireEnv(t)
	parallel(t)
	sb := sandbox(t, "e2e-code-js-cycles", nil)
	checkCyclesLeaveNoProcess(t, sb, client.LanguageJavaScript, "node", "require('child_process').spawn('sleep', ['600'], {stdio: 'ignore'})")
}
