package netns

import (
	"errors"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

// TestCheckID checks that the namespace layer re-checks the sandbox ID grammar itself: names it
// builds paths from never come from an ID the API edge would refuse.
func TestCheckID(t *testing.T) {
	m, err := New(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		id string
		ok bool
	}{
		{"nt-a", true},
		{"hutch", true}, // reserved is the API's rule, not a path's
		{"", false},
		{"Bad/ID", false},
		{"../etc", false},
		{"abc-", false},
		{"-abc", false},
		{strings.Repeat("a", 64), false},
	} {
		err := m.checkID(tt.id)
		if tt.ok != (err == nil) || !tt.ok && !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("checkID(%q) = %v; want ok %v", tt.id, err, tt.ok)
		}
	}
}
