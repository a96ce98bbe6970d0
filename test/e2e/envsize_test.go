package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/envlimit"
)

// TestEnvOverKernelLimit: an env value the kernel would refuse to execve (over MAX_ARG_STRLEN
// as KEY=value with its NUL) is refused with VALIDATION_FAILED at create, leaving no sandbox
// behind that could never start (it used to sit in error: "argument list too long"), and at
// every API of a running sandbox that takes an env; a value at the limit works.
func TestEnvOverKernelLimit(t *testing.T) {
	requireEnv(t)
	parallel(t)
	atLimit := strings.Repeat("v", envlimit.MaxEntry-len("BIG=")-1)
	over := map[string]string{"BIG": strings.Repeat("v", 200<<10)}
	wantInvalid := func(t *testing.T, what string, err error) {
		t.Helper()
		if errdefs.CodeOf(err) != errdefs.CodeInvalidArgument || !strings.Contains(err.Error(), "MAX_ARG_STRLEN") {
			t.Fatalf("%s with a 200 KiB value: %v (code %q); want VALIDATION_FAILED naming MAX_ARG_STRLEN", what, err, errdefs.CodeOf(err))
		}
	}
	_, err := d.Client().Sandbox(ctxT(t, 2*time.Minute), "e2e-env-over", &client.SandboxOptions{InstanceType: "lite", EnvVars: over})
	wantInvalid(t, "create", err)
	if _, err := d.Client().GetSandbox(ctxT(t, time.Minute), "e2e-env-over"); errdefs.CodeOf(err) != errdefs.CodeSandboxNotFound {
		t.Fatalf("after the refused create, GetSandbox = %v; want SANDBOX_NOT_FOUND", err)
	}

	sb := sandbox(t, "e2e-env-edge", &client.SandboxOptions{InstanceType: "lite", EnvVars: map[string]string{"BIG": atLimit}})
	if out := strings.TrimSpace(mustExec(t, sb, `/bin/sh -c 'echo ${#BIG}'`)); out != strconv.Itoa(len(atLimit)) {
		t.Fatalf("a child process sees BIG of %s bytes; want %d", out, len(atLimit))
	}
	_, err = sb.Exec(ctxT(t, time.Minute), "true", &client.ExecOptions{Env: over})
	wantInvalid(t, "exec", err)
	_, err = sb.StartProcess(ctxT(t, time.Minute), "true", client.ProcessOptions{Env: over})
	wantInvalid(t, "process start", err)
	_, err = sb.CreateSession(ctxT(t, time.Minute), &client.SessionOptions{ID: "big", Env: over})
	wantInvalid(t, "session create", err)
}
