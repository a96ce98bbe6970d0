package image

import (
	"context"
	"errors"
	"io"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/lines"
)

// ResolveOrBuild is Resolve, except that a DefaultName that is not built yet is built first
// (ensureDefault): the first sandbox needs no separate build step. progress is as for Build.
func (s *Store) ResolveOrBuild(ctx context.Context, ref string, progress io.Writer) (Image, error) {
	img, err := s.Resolve(ref)
	if errors.Is(err, errdefs.ErrNotFound) && ref == DefaultName {
		return s.ensureDefault(ctx, progress)
	}
	return img, err
}

// Build returns the image named name, building it first unless it is built. Only DefaultName
// has a recipe: any other name is IMAGE_NOT_FOUND. The build's output goes to progress, or with
// progress nil to the store's log, one "image build" line per line of output.
func (s *Store) Build(ctx context.Context, name string, progress io.Writer) (Image, error) {
	if name != DefaultName {
		return Image{}, errdefs.Newf(errdefs.CodeImageNotFound, "no recipe for image %q: only %q can be built", name, DefaultName)
	}
	return s.ensureDefault(ctx, progress)
}

// ensureDefault is Ensure of the default recipe, one at a time in this process.
func (s *Store) ensureDefault(ctx context.Context, progress io.Writer) (Image, error) {
	s.defaultMu.Lock()
	defer s.defaultMu.Unlock()
	if progress == nil {
		// A build on first need (a create that found no image) shows its progress in hutchd's
		// log, line by line.
		s.log.InfoContext(ctx, "building the default image on first need (debootstrap; minutes)", "image_id", s.Default().ID())
		lw := lines.NewWriter(func(line string) { s.log.Info("image build", "line", line) })
		defer lw.Flush()
		progress = lw
	}
	return s.Ensure(ctx, s.Default(), progress)
}
