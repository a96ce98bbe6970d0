package session

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestSaveAndRestore(t *testing.T) {
	work, state := t.TempDir(), t.TempDir()
	file := filepath.Join(t.TempDir(), "agent", "sessions.json")
	base := []string{"PATH=/usr/bin:/bin", "HOME=/root", "BASE=1", "GONE=x"}
	m, err := NewManager(Config{Workdir: work, StateDir: state, Env: base, SaveFile: file})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sub := filepath.Join(work, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(CreateOptions{ID: "named", Env: map[string]string{"CREATED": "c"}}); err != nil {
		t.Fatal(err)
	}
	for sid, cmd := range map[string]string{
		"named":   `cd sub && export FOO="a b=c" && export BASE=2 && unset GONE`,
		DefaultID: `cd /tmp && export DEF=1`,
	} {
		if _, err := m.Exec(ctx, sid, Request{Command: cmd}, newRecorder()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Create(CreateOptions{ID: "deleted"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete("deleted"); err != nil {
		t.Fatal(err)
	}
	n, err := m.Save()
	m.Close()
	if err != nil || n != 2 {
		t.Fatalf("Save = %d, %v; want 2 sessions", n, err)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("saved file mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}

	// A new base env (an added variable) reaches restored sessions too.
	m2, err := NewManager(Config{Workdir: work, StateDir: state, Env: append(base, "NEWBASE=n"), SaveFile: file})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("saved file still there after restore: %v", err)
	}
	var ids []string
	for _, in := range m2.List() {
		ids = append(ids, in.ID)
	}
	if !slices.Equal(ids, []string{"default", "named"}) {
		t.Fatalf("restored sessions = %v; want [default named]", ids)
	}
	rec := newRecorder()
	if _, err := m2.Exec(ctx, "named", Request{Command: `pwd; echo "$FOO|$BASE|${GONE-unset}|$CREATED|$NEWBASE"`}, rec); err != nil {
		t.Fatal(err)
	}
	if got, want := string(rec.stdout), sub+"\na b=c|2|unset|c|n\n"; got != want {
		t.Fatalf("named session after restore: %q; want %q", got, want)
	}
	rec = newRecorder()
	if _, err := m2.Exec(ctx, "", Request{Command: `pwd; echo "$DEF"`}, rec); err != nil {
		t.Fatal(err)
	}
	if got := string(rec.stdout); got != "/tmp\n1\n" {
		t.Fatalf("default session after restore: %q", got)
	}
}

func TestRestoreSkipsBadInput(t *testing.T) {
	work, state := t.TempDir(), t.TempDir()
	file := filepath.Join(t.TempDir(), "sessions.json")
	for name, content := range map[string]string{
		"malformed":   `{"version": 1, "sessions": [`,
		"old version": `{"version": 99, "sessions": [{"id": "x", "cwd": "/"}]}`,
		"bad entries": `{"version": 1, "sessions": [{"id": "bad id", "cwd": "/"}, {"id": "rel", "cwd": "tmp"}, {"id": "ok", "cwd": "/tmp", "env": {"A=B": "x", "": "y", "K": "v"}}]}`,
	} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := NewManager(Config{Workdir: work, StateDir: state, Env: []string{"PATH=/usr/bin:/bin"}, SaveFile: file})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var ids []string
		for _, in := range m.List() {
			ids = append(ids, in.ID)
		}
		m.Close()
		want := []string(nil)
		if name == "bad entries" {
			want = []string{"ok"}
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("%s: sessions %v; want %v", name, ids, want)
		}
		if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: file kept", name)
		}
	}
}
