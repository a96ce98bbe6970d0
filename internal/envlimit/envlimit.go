// Package envlimit holds the kernel's limits on an environment handed to execve and checks the
// environments the API takes (a sandbox's envVars, a command's, a process's, a session's, a code
// context's) against them, so that a value the kernel would refuse is refused when it is sent,
// not when a sandbox or command starts (E2BIG, "argument list too long").
package envlimit

import (
	"github.com/hutchdev/hutch/errdefs"
)

const (
	// MaxEntry is the kernel's MAX_ARG_STRLEN (32 pages): the most bytes one "KEY=value"
	// string may have, its NUL included.
	MaxEntry = 32 * 4096
	// MaxTotal bounds one environment map: the bytes of its strings (NULs included) plus a
	// pointer each, as execve counts them. The kernel's own bound (ARG_MAX) is a quarter of the
	// stack limit, 2 MiB with the usual 8 MiB, for argv and env together; a command's env is
	// the sandbox's, its session's and its own, so each gets a quarter of it.
	MaxTotal = 512 << 10
)

// Size is what the entry KEY=value counts against both limits, as execve counts it.
func Size(key, value string) int { return len(key) + 1 + len(value) + 1 }

// Check returns a VALIDATION_FAILED error (400) naming the variable when one entry of env is
// over MaxEntry, or when env as a whole is over MaxTotal. what names the field in the error
// ("envVars", "env").
func Check(what string, env map[string]string) error {
	total := 0
	for k, v := range env {
		n := Size(k, v)
		if n > MaxEntry {
			return errdefs.Newf(errdefs.CodeInvalidArgument,
				"%s: variable %q is %d bytes as KEY=value with its NUL; the kernel allows at most %d (MAX_ARG_STRLEN)", what, k, n, MaxEntry).
				With("name", k).With("bytes", n).With("limit", MaxEntry)
		}
		total += n + 8
	}
	if total > MaxTotal {
		return errdefs.Newf(errdefs.CodeInvalidArgument,
			"%s: %d variables take %d bytes; at most %d are allowed (a command's argv and environment share the kernel's ARG_MAX)", what, len(env), total, MaxTotal).
			With("bytes", total).With("limit", MaxTotal)
	}
	return nil
}
