package datavol

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
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
			makeFiles(t, filepath.Join(state, "sandboxes"), c.files)
			if got := legacyDisks(state); got != c.want {
				t.Errorf("legacyDisks = %d, want %d", got, c.want)
			}
		})
	}
}

// makeFiles creates files under dir; a name with a trailing / makes a directory.
func makeFiles(t *testing.T, dir string, files []string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, f)
		if strings.HasSuffix(f, "/") {
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
}

// TestAutoSize: a fifth of the free space, within 2–64 GiB.
func TestAutoSize(t *testing.T) {
	for _, c := range []struct {
		free, want int64
	}{
		{0, 2 << 30},
		{5 << 30, 2 << 30},
		{10 << 30, 2 << 30},
		{20 << 30, 4 << 30},
		{100 << 30, 20 << 30},
		{320 << 30, 64 << 30},
		{4 << 40, 64 << 30},
	} {
		if got := autoSize(c.free); got != c.want {
			t.Errorf("autoSize(%d) = %d, want %d", c.free, got, c.want)
		}
	}
}

// TestRequestSize: a set size is parsed; "auto" (or none) keeps an existing image as it is
// and sizes a new one from the free space of its directory.
func TestRequestSize(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "data.img")
	if err := os.WriteFile(existing, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "new.img")
	for _, c := range []struct {
		name, size, image string
		want              int64 // -1: any auto size
		wantErr           string
		code              errdefs.Code
	}{
		{name: "set", size: "16G", image: missing, want: 16 << 30},
		{name: "set, image exists", size: "512M", image: existing, want: 512 << 20},
		{name: "bad size", size: "16 G", image: missing, code: errdefs.CodeInvalidArgument},
		{name: "auto, image exists", size: "auto", image: existing, want: 0},
		{name: "none, image exists", size: "", image: existing, want: 0},
		{name: "auto, new image", size: "auto", image: missing, want: -1},
		{name: "none, new image", size: "", image: missing, want: -1},
		{name: "auto, no directory", size: "auto", image: filepath.Join(dir, "none", "data.img"),
			wantErr: "data volume: free space of " + filepath.Join(dir, "none")},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := requestSize(c.size, c.image)
			switch {
			case c.code != "":
				if !errdefs.IsCode(err, c.code) {
					t.Errorf("requestSize = %d, %v; want %s", got, err, c.code)
				}
			case c.wantErr != "":
				if err == nil || !strings.HasPrefix(err.Error(), c.wantErr) {
					t.Errorf("requestSize = %d, %v; want an error %q…", got, err, c.wantErr)
				}
			case err != nil:
				t.Errorf("requestSize: %v", err)
			case c.want == -1:
				if got < autoSizeMin || got > autoSizeMax {
					t.Errorf("requestSize = %d, want an auto size", got)
				}
			case got != c.want:
				t.Errorf("requestSize = %d, want %d", got, c.want)
			}
		})
	}
}

// TestOpenDataDirStateDir: with the volume off, or with legacy disks in the state dir, the
// state dir is the data directory, nothing is mounted, and the log says why.
func TestOpenDataDirStateDir(t *testing.T) {
	for _, c := range []struct {
		name  string
		image string // "" = <state>/data.img
		files []string
		log   string
	}{
		{"off", Off, nil, `level=INFO msg="data volume off: sandbox disks in the state dir" dir=`},
		{"off with legacy disks", Off, []string{"old/upper/"}, `msg="data volume off`},
		{"legacy disks", "", []string{"old/upper/", "sb/egress.jsonl"},
			`level=WARN msg="sandboxes from before the data volume exist: keeping sandbox disks in the state dir" dir=`},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			makeFiles(t, filepath.Join(state, "sandboxes"), c.files)
			image := c.image
			if image == "" {
				image = filepath.Join(state, "data.img")
			}
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			got, err := OpenDataDir(context.Background(), DataDirConfig{StateDir: state, Image: image, Size: "auto"}, log)
			if err != nil || got != state {
				t.Fatalf("OpenDataDir = %q, %v; want %q", got, err, state)
			}
			if !strings.Contains(buf.String(), c.log) {
				t.Errorf("log %q; want %q", buf.String(), c.log)
			}
			if _, err := os.Stat(filepath.Join(state, "data")); err == nil {
				t.Error("a mountpoint was made")
			}
			if _, err := os.Stat(filepath.Join(state, "data.img")); err == nil {
				t.Error("an image was made")
			}
		})
	}
}
