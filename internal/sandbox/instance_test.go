package sandbox

import (
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

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
