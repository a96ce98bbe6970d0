package image

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

// TestOnDemand: ResolveOrBuild and Build return a built default image as it is, build it
// when missing (here a build that fails at once: its context is cancelled), logging the build
// on first need when no one watches its progress, and know no recipe but the default's.
func TestOnDemand(t *testing.T) {
	const firstNeed = `msg="building the default image on first need (debootstrap; minutes)" image_id=`
	for _, c := range []struct {
		name     string
		build    bool // Build, else ResolveOrBuild
		ref      string
		built    bool // the default image exists
		progress bool // a progress writer is given
		code     errdefs.Code
		anyErr   bool // some error (the cancelled build's)
		logged   bool // the first-need line is logged
	}{
		{name: "resolve built default", ref: DefaultName, built: true},
		{name: "build built default", build: true, ref: DefaultName, built: true, progress: true},
		{name: "resolve unknown", ref: "nope", code: errdefs.CodeImageNotFound},
		{name: "build unknown", build: true, ref: "nope", code: errdefs.CodeImageNotFound},
		{name: "build unknown, default built", build: true, ref: "python", built: true, code: errdefs.CodeImageNotFound},
		{name: "resolve missing default", ref: DefaultName, anyErr: true, logged: true},
		{name: "build missing default", build: true, ref: DefaultName, anyErr: true, logged: true},
		{name: "build missing default, with progress", build: true, ref: DefaultName, progress: true, anyErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var log bytes.Buffer
			s := NewStore(dir, slog.New(slog.NewTextHandler(&log, nil)))
			id := s.Default().ID()
			if c.built {
				if err := os.MkdirAll(filepath.Join(dir, id, "rootfs"), 0o755); err != nil {
					t.Fatal(err)
				}
				meta := `{"id":"` + id + `","name":"default","createdAt":"2026-01-01T00:00:00Z"}`
				if err := os.WriteFile(filepath.Join(dir, id, "image.json"), []byte(meta), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// A build that starts fails at once, before debootstrap runs.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var progress io.Writer
			if c.progress {
				progress = io.Discard
			}
			var img Image
			var err error
			if c.build {
				img, err = s.Build(ctx, c.ref, progress)
			} else {
				img, err = s.ResolveOrBuild(ctx, c.ref, progress)
			}
			switch {
			case c.code != "":
				if !errdefs.IsCode(err, c.code) {
					t.Errorf("err = %v, want %s", err, c.code)
				}
			case c.anyErr:
				if err == nil {
					t.Errorf("a cancelled build succeeded: %+v", img)
				}
			case err != nil || img.ID != id || img.RootFS != filepath.Join(dir, id, "rootfs"):
				t.Errorf("= %+v, %v; want the built default %s", img, err, id)
			}
			if got := strings.Contains(log.String(), firstNeed+id); got != c.logged {
				t.Errorf("first-need line logged: %v, want %v; log:\n%s", got, c.logged, log.String())
			}
			if !c.anyErr && log.Len() > 0 {
				t.Errorf("no build expected; log:\n%s", log.String())
			}
		})
	}
}
