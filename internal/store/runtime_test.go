package store

import (
	"context"
	"path/filepath"
	"testing"
)

func TestSandboxRuntimeColumn(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct{ id, give, want string }{
		{"dflt", "", "runc"},
		{"gv", "gvisor", "gvisor"},
	} {
		if _, err := s.Insert(ctx, Sandbox{ID: tc.id, Status: "creating", Runtime: tc.give}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, tc.id)
		if err != nil || got.Runtime != tc.want {
			t.Errorf("%s: Runtime = %q, %v; want %q", tc.id, got.Runtime, err, tc.want)
		}
	}
}
