package sandboxid

import (
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestParse(t *testing.T) {
	tests := []struct {
		id   string
		want errdefs.Code // "" = valid
	}{
		{"agent-session-47", ""},
		{"a", ""},
		{"0", ""},
		{"a-b", ""},
		{strings.Repeat("a", 63), ""},
		{"", errdefs.CodeInvalidSandboxID},
		{strings.Repeat("a", 64), errdefs.CodeInvalidSandboxID},
		{"-abc", errdefs.CodeInvalidSandboxID},
		{"abc-", errdefs.CodeInvalidSandboxID},
		{"-", errdefs.CodeInvalidSandboxID},
		{"Abc", errdefs.CodeInvalidSandboxID},
		{"a_b", errdefs.CodeInvalidSandboxID},
		{"a.b", errdefs.CodeInvalidSandboxID},
		{"a/b", errdefs.CodeInvalidSandboxID},
		{"..", errdefs.CodeInvalidSandboxID},
		{"a\x00b", errdefs.CodeInvalidSandboxID},
		{"ünï", errdefs.CodeInvalidSandboxID},
		{"a\xffb", errdefs.CodeInvalidSandboxID},
		{"api", errdefs.CodeReservedSandboxID},
		{"www", errdefs.CodeReservedSandboxID},
		{"hutch", errdefs.CodeReservedSandboxID},
		{"localhost", errdefs.CodeReservedSandboxID},
	}
	for _, tt := range tests {
		id, err := Parse(tt.id)
		if tt.want == "" {
			if err != nil || id.String() != tt.id {
				t.Errorf("Parse(%q) = %q, %v; want the ID", tt.id, id, err)
			}
			continue
		}
		if !errdefs.IsCode(err, tt.want) || id != "" {
			t.Errorf("Parse(%q) = %q, %v; want code %s", tt.id, id, err, tt.want)
		}
		// The grammar alone accepts reserved names and refuses everything else Parse refuses.
		if cerr := CheckName(tt.id); (cerr == nil) != (tt.want == errdefs.CodeReservedSandboxID) {
			t.Errorf("CheckName(%q) = %v", tt.id, cerr)
		}
	}
}

func TestCheckNameAllocatesNothing(t *testing.T) {
	id := "agent-session-47"
	if n := testing.AllocsPerRun(100, func() { _ = CheckName(id) }); n != 0 {
		t.Errorf("CheckName of a valid name allocates %v times", n)
	}
}
