package runsc

import (
	"os"
	"path/filepath"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestTmpStaysOnDisk: the spec binds the root file system's /tmp over /tmp (runsc would mount
// a tmpfs there otherwise), never follows a symlinked /tmp, and keeps a /tmp mount the caller
// gave.
func TestTmpStaysOnDisk(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	linked := t.TempDir()
	if err := os.Symlink("/etc", filepath.Join(linked, "tmp")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, root string
		mounts     []specs.Mount
		want       string // the /tmp mount's source; "" = none
	}{
		{"bound", root, nil, filepath.Join(root, "tmp")},
		{"symlinked /tmp is not followed", linked, nil, ""},
		{"caller's /tmp kept", root, []specs.Mount{{Destination: "/tmp/", Type: "tmpfs", Source: "tmpfs"}}, "tmpfs"},
	}
	for _, tt := range tests {
		spec := &specs.Spec{Mounts: tt.mounts}
		keepTmpOnDisk(spec, tt.root)
		got := ""
		n := 0
		for _, m := range spec.Mounts {
			if filepath.Clean(m.Destination) == "/tmp" {
				got = m.Source
				n++
			}
		}
		if got != tt.want || n > 1 {
			t.Errorf("%s: /tmp source %q (%d mounts), want %q", tt.name, got, n, tt.want)
		}
	}
}
