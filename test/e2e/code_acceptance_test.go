package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// Acceptance case C1 (../shared/acceptance/cases.md), word for word: a JavaScript context
// awaits a promise at the top level and gets its value, keeps a const between runs, and a
// TypeScript run with type annotations works. (C2, a missing interpreter failing at once and
// naming it, is in internal/agent/interp's unit tests: the image has every interpreter.)
func TestCodeAcceptanceC1(t *testing.T) {
	requireEnv(t)
	parallel(t)
	sb := sandbox(t, "e2e-code-c1", &client.SandboxOptions{InstanceType: "lite"})
	ctx := ctxT(t, 5*time.Minute)
	js, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{Language: "javascript"})
	if err != nil {
		t.Fatal(err)
	}
	text := func(x *client.CodeExecution) string {
		if len(x.Results) != 1 {
			t.Fatalf("results = %+v", x.Results)
		}
		return strings.TrimSpace(x.Results[0].Text)
	}
	if got := text(runOK(t, sb, js.ID, "await Promise.resolve(42)")); got != "42" {
		t.Errorf("await Promise.resolve(42) → %q, want 42 (not a pending promise)", got)
	}
	runOK(t, sb, js.ID, "const v = 1")
	if got := text(runOK(t, sb, js.ID, "v + 1")); got != "2" {
		t.Errorf("v + 1 → %q, want 2", got)
	}
	ts, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{Language: "typescript"})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(runOK(t, sb, ts.ID, "function add(a: number, b: number): number { return a + b }\nadd(40, 2)")); got != "42" {
		t.Errorf("TypeScript with annotations → %q, want 42", got)
	}
}
