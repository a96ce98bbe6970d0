package watch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestBadInput(t *testing.T) {
	base := t.TempDir()
	m := newTestManager(t, Config{Roots: []string{base}})
	file := filepath.Join(base, "file")
	write(t, file, "x")
	if err := os.Symlink("/etc", filepath.Join(base, "escape")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		path string
		opts Options
		code errdefs.Code
	}{
		{"empty", "", Defaults(), errdefs.CodeInvalidPath},
		{"relative", "workspace", Defaults(), errdefs.CodeInvalidPath},
		{"nul", base + "/a\x00b", Defaults(), errdefs.CodeInvalidPath},
		{"missing", filepath.Join(base, "missing"), Defaults(), errdefs.CodeFileNotFound},
		{"file", file, Defaults(), errdefs.CodeNotDirectory},
		{"outside", "/etc", Defaults(), errdefs.CodeInvalidPath},
		{"dotdot", base + strings.Repeat("/..", 20) + "/etc", Defaults(), errdefs.CodeInvalidPath},
		{"symlink out", filepath.Join(base, "escape"), Defaults(), errdefs.CodeInvalidPath},
		{"bad include", base, Options{Include: []string{"["}}, errdefs.CodeInvalidPattern},
		{"empty exclude", base, Options{Exclude: []string{""}}, errdefs.CodeInvalidPattern},
		{"too many", base, Options{Include: make([]string, MaxPatterns+1)}, errdefs.CodeInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := m.Watch(c.path, c.opts)
			if err == nil {
				w.Close()
				t.Fatal("no error")
			}
			if !errdefs.IsCode(err, c.code) {
				t.Errorf("err = %v (%s), want %s", err, errdefs.CodeOf(err), c.code)
			}
			if _, err := m.Check(c.path, ""); c.opts.Include == nil && c.opts.Exclude == nil && !errdefs.IsCode(err, c.code) {
				t.Errorf("Check: err = %v, want %s", err, c.code)
			}
		})
	}
	if errdefs.HTTPStatus(errdefs.New(errdefs.CodeFileNotFound, "")) != 404 {
		t.Error("FILE_NOT_FOUND is not 404")
	}
}

func TestLimits(t *testing.T) {
	m := newTestManager(t, Config{MaxWatches: 1, MaxDirs: 3})
	root := t.TempDir()
	w := startWatch(t, m, root, Defaults())
	_, err := m.Watch(t.TempDir(), Defaults())
	if !errdefs.IsCode(err, errdefs.CodeWatchLimit) || !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("second watch: %v", err)
	}
	w.Close()
	big := t.TempDir()
	for i := range 5 {
		if err := os.Mkdir(filepath.Join(big, fmt.Sprint(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Watch(big, Defaults()); !errdefs.IsCode(err, errdefs.CodeWatchLimit) {
		t.Fatalf("watch of 6 dirs with MaxDirs 3: %v", err)
	}
	// Past the limit while running: an error event, and the stream goes on.
	w = startWatch(t, m, root, Defaults())
	for i := range 3 {
		if err := os.Mkdir(filepath.Join(root, fmt.Sprint("d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	evs := collect(t, w, func(evs []Event) bool {
		return slices.ContainsFunc(evs, func(e Event) bool { return e.Kind == KindError })
	})
	for _, e := range evs {
		if e.Kind == KindError && !errdefs.IsCode(e.Err, errdefs.CodeWatchLimit) {
			t.Errorf("error event %v", e.Err)
		}
	}
	f := filepath.Join(root, "still")
	write(t, f, "x")
	collect(t, w, hasAll(Create, f))
}

func TestMatch(t *testing.T) {
	cases := []struct {
		pats []string
		rel  string
		want bool
	}{
		{[]string{"node_modules"}, "node_modules", true},
		{[]string{"node_modules"}, "a/node_modules/b.js", true},
		{[]string{"*.ts"}, "src/deep/a.ts", true},
		{[]string{"*.ts"}, "src/a.tsx", false},
		{[]string{"src/*.ts"}, "src/a.ts", true},
		{[]string{"src/*.ts"}, "lib/src/a.ts", false},
		{[]string{".git"}, ".github/x", false},
		{nil, "a", false},
	}
	for _, c := range cases {
		if got := matchAny(c.pats, c.rel); got != c.want {
			t.Errorf("matchAny(%q, %q) = %v", c.pats, c.rel, got)
		}
	}
}
