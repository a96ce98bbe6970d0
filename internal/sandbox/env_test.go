package sandbox

import (
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/envlimit"
)

// TestValidateEnvSize: a sandbox's envVars that the kernel would refuse to execve (an entry over
// MAX_ARG_STRLEN, or too much in all) are refused at create, before a sandbox is recorded that
// could never start.
func TestValidateEnvSize(t *testing.T) {
	entry := func(n int) string { return strings.Repeat("v", n-len("K=")-1) }
	five := map[string]string{}
	for _, k := range []string{"A", "B", "C", "D", "E"} {
		five[k] = strings.Repeat("t", 120<<10)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want errdefs.Code
	}{
		{"at MAX_ARG_STRLEN", map[string]string{"K": entry(envlimit.MaxEntry)}, ""},
		{"a byte over", map[string]string{"K": entry(envlimit.MaxEntry + 1)}, errdefs.CodeInvalidArgument},
		{"200 KiB", map[string]string{"TOKEN": strings.Repeat("x", 200<<10)}, errdefs.CodeInvalidArgument},
		{"600 KiB in all", five, errdefs.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validateEnv(tc.env)
			if got := errdefs.CodeOf(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
				t.Fatalf("validateEnv = %v (code %q); want %q", err, got, tc.want)
			}
		})
	}
}
