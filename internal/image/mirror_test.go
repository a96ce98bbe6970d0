package image

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestHostMirror(t *testing.T) {
	const deb822 = `Types: deb
# a comment
URIs: http://mirror.example.test/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://mirror.example.test/debian-security
Suites: bookworm-security
Components: main
`
	for _, tc := range []struct {
		name  string
		files map[string]string // relative to a fake /etc/apt
		suite string
		want  string // "" = an error
	}{
		{"deb822", map[string]string{"sources.list.d/debian.sources": deb822}, "bookworm", "http://mirror.example.test/debian"},
		{"deb822, other suite falls back to a base one", map[string]string{"sources.list.d/debian.sources": deb822}, "trixie", "http://mirror.example.test/debian"},
		{"one-line with options", map[string]string{"sources.list": "# x\ndeb-src http://src.example.test/debian bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] http://one.example.test/debian/ bookworm main\n"}, "bookworm", "http://one.example.test/debian"},
		{"security only", map[string]string{"sources.list": "deb http://sec.example.test/debian-security bookworm-security main\n"}, "bookworm", ""},
		{"disabled stanza", map[string]string{"sources.list.d/a.sources": "Enabled: no\nTypes: deb\nURIs: http://off.example.test/debian\nSuites: bookworm\n\nTypes: deb deb-src\nURIs: http://on.example.test/debian\nSuites: bookworm\n"}, "bookworm", "http://on.example.test/debian"},
		{"sources.list first, then sources.list.d by name", map[string]string{
			"sources.list":              "deb http://first.example.test/debian bookworm main\n",
			"sources.list.d/b.list":     "deb http://b.example.test/debian bookworm main\n",
			"sources.list.d/a.sources":  "Types: deb\nURIs: http://a.example.test/debian\nSuites: bookworm\n",
			"sources.list.d/z.disabled": "deb http://z.example.test/debian bookworm main\n",
		}, "bookworm", "http://first.example.test/debian"},
		{"nothing", map[string]string{}, "bookworm", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "sources.list.d"), 0o755); err != nil {
				t.Fatal(err)
			}
			for name, body := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			old := aptSources
			aptSources = []string{filepath.Join(dir, "sources.list"), filepath.Join(dir, "sources.list.d")}
			t.Cleanup(func() { aptSources = old })
			got, err := HostMirror(tc.suite)
			if tc.want == "" {
				if !errors.Is(err, errdefs.ErrFailedPrecondition) {
					t.Fatalf("HostMirror(%q) = %q, %v; want the no-mirror error", tc.suite, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("HostMirror(%q) = %q, %v; want %q", tc.suite, got, err, tc.want)
			}
		})
	}
}

func TestDefaultRecipeUsesHostMirror(t *testing.T) {
	if m := DefaultRecipe().Mirror; m != "" {
		t.Fatalf("DefaultRecipe().Mirror = %q; want empty (the host's mirror, read at build time)", m)
	}
}
