package ocispec

import (
	"errors"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

// TestCheckID checks the container ID rule is the sandbox ID grammar: one an API request could
// not have made never names a bundle or cgroup.
func TestCheckID(t *testing.T) {
	for _, tt := range []struct {
		id string
		ok bool
	}{
		{"rt-test-0a1b", true},
		{"hutch", true}, // the default cgroup parent: reserved names are the API's rule
		{"", false},
		{"a/b", false},
		{"..", false},
		{"abc-", false},
		{"-abc", false},
		{"Abc", false},
		{strings.Repeat("a", 64), false},
	} {
		err := CheckID(tt.id)
		if tt.ok != (err == nil) || !tt.ok && (!errors.Is(err, errdefs.ErrInvalidArgument) || !errdefs.IsCode(err, errdefs.CodeInvalidArgument)) {
			t.Errorf("CheckID(%q) = %v; want ok %v", tt.id, err, tt.ok)
		}
	}
}
