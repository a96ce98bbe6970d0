package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

func newTestManager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	if cfg.Roots == nil {
		cfg.Roots = []string{os.TempDir()}
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	m := NewManager(cfg)
	t.Cleanup(m.Close)
	return m
}

func startWatch(t *testing.T, m *Manager, dir string, opts Options) *Watcher {
	t.Helper()
	w, err := m.Watch(dir, opts)
	if err != nil {
		t.Fatalf("Watch(%s): %v", dir, err)
	}
	t.Cleanup(w.Close)
	return w
}

// collect reads events until done says so (given all events so far) or 10 s pass.
func collect(t *testing.T, w *Watcher, done func([]Event) bool) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var evs []Event
	for !done(evs) {
		ev, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %v: %v", describe(evs), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// quiet reads events for d and returns them (none expected, usually).
func quiet(w *Watcher, d time.Duration) []Event {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var evs []Event
	for {
		ev, err := w.Next(ctx)
		if err != nil {
			return evs
		}
		evs = append(evs, ev)
	}
}

func describe(evs []Event) []string {
	var out []string
	for _, e := range evs {
		switch e.Kind {
		case KindEvent:
			out = append(out, fmt.Sprintf("%s %s dir=%v", e.Type, e.Path, e.IsDir))
		case KindOverflow:
			out = append(out, fmt.Sprintf("overflow %d", e.Dropped))
		case KindError:
			out = append(out, fmt.Sprintf("error %v", e.Err))
		default:
			out = append(out, fmt.Sprintf("stopped %s", e.Reason))
		}
	}
	return out
}

// has reports whether evs hold an event of typ for p.
func has(evs []Event, typ Type, p string) bool {
	return slices.ContainsFunc(evs, func(e Event) bool { return e.Kind == KindEvent && e.Type == typ && e.Path == p })
}

func hasAll(pairs ...any) func([]Event) bool {
	return func(evs []Event) bool {
		for i := 0; i < len(pairs); i += 2 {
			if !has(evs, pairs[i].(Type), pairs[i+1].(string)) {
				return false
			}
		}
		return true
	}
}

func write(t *testing.T, p, data string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRecursiveAndNewSubdirectories(t *testing.T) {
	m := newTestManager(t, Config{})
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, m, root, Defaults())
	if w.Path() != root || w.ID() == "" {
		t.Fatalf("Path %q ID %q", w.Path(), w.ID())
	}
	// An existing deep directory is watched.
	deep := filepath.Join(root, "a", "b", "f.txt")
	write(t, deep, "x")
	collect(t, w, hasAll(Create, deep))
	// New directories, filled at once: everything in them is reported, whether the watch or
	// the scan saw it.
	nested := filepath.Join(root, "new", "x", "y")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(nested, "f.txt"), "hi")
	evs := collect(t, w, hasAll(Create, filepath.Join(root, "new"), Create, filepath.Join(root, "new", "x"),
		Create, nested, Create, filepath.Join(nested, "f.txt")))
	for _, e := range evs {
		if e.Path == nested && !e.IsDir {
			t.Errorf("%s reported as a file", nested)
		}
	}
	// The new deepest directory is watched too.
	later := filepath.Join(nested, "later.txt")
	time.Sleep(100 * time.Millisecond)
	write(t, later, "y")
	collect(t, w, hasAll(Create, later))
}

func TestExcludesAndIncludes(t *testing.T) {
	m := newTestManager(t, Config{})
	root := t.TempDir()
	w := startWatch(t, m, root, Defaults())
	for _, d := range []string{".git", "node_modules/pkg", "src"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	write(t, filepath.Join(root, ".git", "HEAD"), "ref")
	write(t, filepath.Join(root, "node_modules", "pkg", "index.js"), "js")
	marker := filepath.Join(root, "src", "marker")
	write(t, marker, "m")
	evs := collect(t, w, hasAll(Create, marker))
	evs = append(evs, quiet(w, 200*time.Millisecond)...)
	for _, e := range evs {
		if rel, _ := filepath.Rel(root, e.Path); rel != "src" && rel != "src/marker" {
			t.Errorf("excluded path reported: %s", describe([]Event{e}))
		}
	}
	if n := w.Dirs(); n != 2 { // root and src; .git and node_modules are not watched
		t.Errorf("watched dirs = %d, want 2", n)
	}

	// Include *.ts, exclude a relative glob.
	root2 := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root2, "src", "gen"), 0o755); err != nil {
		t.Fatal(err)
	}
	w2 := startWatch(t, m, root2, Options{Recursive: true, Include: []string{"*.ts"}, Exclude: []string{"src/gen"}})
	write(t, filepath.Join(root2, "src", "gen", "x.ts"), "gen")
	write(t, filepath.Join(root2, "src", "a.js"), "js")
	ts := filepath.Join(root2, "src", "a.ts")
	write(t, ts, "ts")
	evs = collect(t, w2, hasAll(Create, ts))
	evs = append(evs, quiet(w2, 200*time.Millisecond)...)
	for _, e := range evs {
		if e.Path != ts {
			t.Errorf("unexpected event %v", describe([]Event{e}))
		}
	}
}

func TestCoalescing(t *testing.T) {
	m := newTestManager(t, Config{})
	root := t.TempDir()
	existing := filepath.Join(root, "existing")
	write(t, existing, "0")
	w := startWatch(t, m, root, Options{Recursive: true, Coalesce: 300 * time.Millisecond})
	fresh := filepath.Join(root, "fresh")
	f, err := os.Create(fresh)
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.OpenFile(existing, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		fmt.Fprintf(f, "line %d\n", i)
		fmt.Fprintf(g, "line %d\n", i)
	}
	f.Close()
	g.Close()
	transient := filepath.Join(root, "transient")
	write(t, transient, "t")
	if err := os.Remove(transient); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, w, hasAll(Create, fresh, Modify, existing, Create, transient, Delete, transient))
	evs = append(evs, quiet(w, 500*time.Millisecond)...)
	want := []string{
		"create " + fresh + " dir=false",
		"modify " + existing + " dir=false",
		"create " + transient + " dir=false",
		"delete " + transient + " dir=false",
	}
	if got := describe(evs); !slices.Equal(got, want) {
		t.Errorf("events\n got %q\nwant %q", got, want)
	}
}

func TestMoves(t *testing.T) {
	m := newTestManager(t, Config{})
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "d", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, m, root, Defaults())
	a, b := filepath.Join(root, "a"), filepath.Join(root, "d", "b")
	write(t, a, "a")
	collect(t, w, hasAll(Create, a))
	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	collect(t, w, hasAll(MoveFrom, a, MoveTo, b))
	// A directory moved away stops being watched under its old name; one moved in is
	// watched and its content reported.
	if err := os.Rename(filepath.Join(root, "d"), filepath.Join(outside, "d")); err != nil {
		t.Fatal(err)
	}
	collect(t, w, hasAll(MoveFrom, filepath.Join(root, "d")))
	write(t, filepath.Join(outside, "d", "sub", "ignored"), "x")
	if err := os.Rename(filepath.Join(outside, "d"), filepath.Join(root, "back")); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, w, hasAll(MoveTo, filepath.Join(root, "back"), Create, filepath.Join(root, "back", "sub", "ignored")))
	for _, e := range evs {
		if rel, _ := filepath.Rel(root, e.Path); rel == "d/sub/ignored" {
			t.Errorf("event under the moved-away directory: %v", describe([]Event{e}))
		}
	}
	late := filepath.Join(root, "back", "sub", "late")
	write(t, late, "l")
	collect(t, w, hasAll(Create, late))
}

func TestOverflowTinyQueue(t *testing.T) {
	m := newTestManager(t, Config{})
	root := t.TempDir()
	w := startWatch(t, m, root, Options{Recursive: true, QueueSize: 10, Coalesce: 5 * time.Millisecond})
	const n = 100
	for i := range n { // empty files: one raw event each
		f, err := os.OpenFile(filepath.Join(root, fmt.Sprintf("f%03d", i)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	testutil.Poll(t, 10*time.Millisecond, 10*time.Second, func() bool { return w.q.totalDropped() >= n-10 })
	evs := quiet(w, 300*time.Millisecond)
	got := describe(evs)
	if len(evs) != 11 || evs[10].Kind != KindOverflow || evs[10].Dropped != n-10 {
		t.Fatalf("events = %q; want 10 creates then overflow %d", got, n-10)
	}
	// After the consumer caught up, events flow again.
	after := filepath.Join(root, "after")
	write(t, after, "x")
	collect(t, w, hasAll(Create, after))
}

func TestStoppedWhenDeleted(t *testing.T) {
	m := newTestManager(t, Config{})
	root := filepath.Join(t.TempDir(), "w")
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "sub", "f"), "x")
	w := startWatch(t, m, root, Defaults())
	if m.Active() != 1 {
		t.Fatalf("Active = %d", m.Active())
	}
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, w, func(evs []Event) bool { return len(evs) > 0 && evs[len(evs)-1].Kind == KindStopped })
	if last := evs[len(evs)-1]; last.Reason != "the watched directory was deleted" {
		t.Errorf("stopped reason %q", last.Reason)
	}
	if !has(evs, Delete, filepath.Join(root, "sub", "f")) {
		t.Errorf("no delete of sub/f in %q", describe(evs))
	}
	if _, err := w.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Errorf("Next after stopped: %v, want EOF", err)
	}
	testutil.Poll(t, 10*time.Millisecond, 5*time.Second, func() bool { return m.Active() == 0 })
	if m.Active() != 0 {
		t.Errorf("Active = %d after the stream ended", m.Active())
	}
}

func TestManagerCloseStopsWatches(t *testing.T) {
	m := newTestManager(t, Config{})
	w := startWatch(t, m, t.TempDir(), Defaults())
	m.Close()
	evs := collect(t, w, func(evs []Event) bool { return len(evs) > 0 })
	if evs[0].Kind != KindStopped || evs[0].Reason != "the agent is shutting down" {
		t.Errorf("got %q", describe(evs))
	}
	if _, err := m.Watch(t.TempDir(), Defaults()); !errdefs.IsCode(err, errdefs.CodeUnavailable) {
		t.Errorf("Watch after Close: %v", err)
	}
}

func TestNonRecursive(t *testing.T) {
	m := newTestManager(t, Config{})
	root := t.TempDir()
	sub := filepath.Join(root, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, m, root, Options{Recursive: false})
	if w.Dirs() != 1 {
		t.Errorf("Dirs = %d, want 1", w.Dirs())
	}
	write(t, filepath.Join(sub, "deep"), "x")
	top := filepath.Join(root, "top")
	write(t, top, "x")
	if err := os.Remove(sub); err == nil {
		t.Fatal("sub is not empty but was removed")
	}
	if err := os.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, w, hasAll(Create, top, Delete, sub))
	for _, e := range evs {
		if e.Path == filepath.Join(sub, "deep") {
			t.Errorf("event below a non-recursive watch: %v", describe([]Event{e}))
		}
		if e.Path == sub && !e.IsDir {
			t.Errorf("delete of sub not marked as a directory")
		}
	}
}
