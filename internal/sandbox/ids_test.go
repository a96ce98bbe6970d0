package sandbox

import (
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestValidateID(t *testing.T) {
	// The grammar's table is internal/sandboxid's; this checks the edge uses all of it.
	tests := []struct {
		id   string
		want errdefs.Code // "" = valid
	}{
		{"agent-session-47", ""},
		{strings.Repeat("a", 64), errdefs.CodeInvalidSandboxID},
		{"abc-", errdefs.CodeInvalidSandboxID},
		{"a/b", errdefs.CodeInvalidSandboxID},
		{"hutch", errdefs.CodeReservedSandboxID},
	}
	for _, tt := range tests {
		err := ValidateID(tt.id)
		if tt.want == "" {
			if err != nil {
				t.Errorf("ValidateID(%q) = %v; want nil", tt.id, err)
			}
			continue
		}
		if !errdefs.IsCode(err, tt.want) {
			t.Errorf("ValidateID(%q) = %v; want code %s", tt.id, err, tt.want)
		}
	}
}

func TestLookupInstanceType(t *testing.T) {
	it, err := LookupInstanceType("")
	if err != nil || it.Name != DefaultInstanceType {
		t.Fatalf("default = %+v, %v", it, err)
	}
	lite, err := LookupInstanceType("lite")
	if err != nil || lite.MemoryBytes != 256<<20 {
		t.Fatalf("lite = %+v, %v", lite, err)
	}
	if _, err := LookupInstanceType("huge"); !errdefs.IsCode(err, errdefs.CodeInvalidInstance) {
		t.Fatalf("huge err = %v", err)
	}
}
