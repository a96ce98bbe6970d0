package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLegacyDisks: only sandbox directories with a disk (upper/) in the state dir keep a
// hutchd off its data volume; an egress audit log there does not.
func TestLegacyDisks(t *testing.T) {
	for _, c := range []struct {
		name  string
		files []string // relative to <state>/sandboxes; a trailing / makes a directory
		want  int
	}{
		{"none", nil, 0},
		{"egress logs only", []string{"sb1/egress.jsonl", "sb2/egress.jsonl"}, 0},
		{"a legacy disk", []string{"old/upper/", "old/work/", "sb1/egress.jsonl"}, 1},
		{"upper is a file", []string{"odd/upper"}, 0},
		{"two disks", []string{"a/upper/", "b/upper/workspace/"}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			for _, f := range c.files {
				p := filepath.Join(state, "sandboxes", f)
				if f[len(f)-1] == '/' {
					if err := os.MkdirAll(p, 0o700); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("{}\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if got := legacyDisks(state); got != c.want {
				t.Errorf("legacyDisks = %d, want %d", got, c.want)
			}
		})
	}
}
