package oom

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWatch(t *testing.T) {
	for _, layout := range []struct {
		name, file, before, after string
	}{
		{"v2", "memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n", "low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\n"},
		{"v1", "memory/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"},
	} {
		t.Run(layout.name, func(t *testing.T) {
			root := t.TempDir()
			path := filepath.Join(root, layout.file)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(layout.before), 0o644); err != nil {
				t.Fatal(err)
			}
			c := Counter{Root: root}
			w := c.Start()
			if got := w.Reason(137); got != "" {
				t.Fatalf("no new kill: reason %q", got)
			}
			if err := os.WriteFile(path, []byte(layout.after), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				code int
				want string
			}{{137, Reason}, {0, ""}, {1, ""}, {143, ""}} {
				if got := w.Reason(tc.code); got != tc.want {
					t.Errorf("exit %d: reason %q, want %q", tc.code, got, tc.want)
				}
			}
		})
	}
	// No cgroup files: nothing is reported.
	w := Counter{Root: t.TempDir()}.Start()
	if got := w.Reason(137); got != "" {
		t.Fatalf("without a counter: %q", got)
	}
	// A malformed counter is not a counter.
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "memory.events"), []byte("oom_kill x\n"), 0o644)
	if _, ok := (Counter{Root: root}).Kills(); ok {
		t.Fatal("malformed counter accepted")
	}
}
