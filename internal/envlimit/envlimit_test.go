package envlimit

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestCheck(t *testing.T) {
	// A value that makes "K=value\x00" exactly n bytes.
	val := func(n int) string { return strings.Repeat("v", n-len("K=")-1) }
	many := func(count, each int) map[string]string {
		m := map[string]string{}
		for i := range count {
			m[fmt.Sprintf("V%d", i)] = strings.Repeat("x", each)
		}
		return m
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		ok   bool
	}{
		{"empty", nil, true},
		{"small", map[string]string{"A": "b"}, true},
		{"one entry at MAX_ARG_STRLEN", map[string]string{"K": val(MaxEntry)}, true},
		{"one entry a byte over", map[string]string{"K": val(MaxEntry + 1)}, false},
		{"a 200 KiB value", map[string]string{"TOKEN": strings.Repeat("t", 200<<10)}, false},
		{"a long name counts too", map[string]string{strings.Repeat("N", MaxEntry): "v"}, false},
		{"many entries under the total", many(4, 100<<10), true},
		{"many entries over the total", many(6, 100<<10), false},
		{"many small entries over the total", many(40000, 8), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check("envVars", tc.env)
			if tc.ok {
				if err != nil {
					t.Fatalf("Check = %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.CodeOf(err) != errdefs.CodeInvalidArgument {
				t.Fatalf("Check = %v (code %s); want VALIDATION_FAILED", err, errdefs.CodeOf(err))
			}
			if !strings.Contains(err.Error(), "envVars") {
				t.Errorf("the error %q does not name the field", err)
			}
		})
	}
}

// TestMaxEntryIsTheKernels: what Check lets through, execve takes; a byte more, it refuses
// (E2BIG), so the constant is the running kernel's.
func TestMaxEntryIsTheKernels(t *testing.T) {
	run := func(n int) error {
		cmd := exec.Command("/bin/true")
		cmd.Env = []string{"K=" + strings.Repeat("v", n-len("K=")-1)}
		return cmd.Run()
	}
	if err := run(MaxEntry); err != nil {
		t.Fatalf("execve with an entry of MaxEntry bytes: %v", err)
	}
	if err := run(MaxEntry + 1); !errors.Is(err, syscall.E2BIG) {
		t.Fatalf("execve with an entry of MaxEntry+1 bytes: %v; want E2BIG", err)
	}
}
