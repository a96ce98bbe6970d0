package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"

	"github.com/hutchdev/hutch/errdefs"
)

// Store is a directory of built images. It is safe for concurrent use, also by several
// processes sharing the directory: builds are serialised per image ID with a file lock.
type Store struct {
	dir string
	log *slog.Logger
	// defaultMu makes concurrent builds of the default image on first need (ResolveOrBuild,
	// Build) in this process share one build; the file lock does the same across processes.
	defaultMu sync.Mutex
}

// NewStore returns a store rooted at dir (created on first build). log receives build steps.
func NewStore(dir string, log *slog.Logger) *Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{dir: dir, log: log}
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Default returns the recipe of the default image (DefaultRecipe).
func (s *Store) Default() Recipe { return DefaultRecipe() }

var idPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// Get returns the built image with the given ID. A malformed or unknown ID gives an
// *errdefs.Error with code IMAGE_NOT_FOUND (class errdefs.ErrNotFound).
func (s *Store) Get(id string) (Image, error) {
	if !idPattern.MatchString(id) {
		return Image{}, errdefs.Newf(errdefs.CodeImageNotFound, "image %q not found", id)
	}
	dir := filepath.Join(s.dir, id)
	b, err := os.ReadFile(filepath.Join(dir, "image.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return Image{}, errdefs.Newf(errdefs.CodeImageNotFound, "image %q not found", id)
	}
	if err != nil {
		return Image{}, fmt.Errorf("image: read metadata of %s: %w", id, err)
	}
	var img Image
	if err := json.Unmarshal(b, &img); err != nil {
		return Image{}, fmt.Errorf("image: decode metadata of %s: %w", id, err)
	}
	img.RootFS = filepath.Join(dir, "rootfs")
	return img, nil
}

// List returns every built image, newest first. A missing store directory is an empty list.
func (s *Store) List() ([]Image, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("image: list %s: %w", s.dir, err)
	}
	var out []Image
	for _, e := range entries {
		if !e.IsDir() || !idPattern.MatchString(e.Name()) {
			continue
		}
		img, err := s.Get(e.Name())
		if errors.Is(err, errdefs.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, img)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, nil
}

// Resolve returns the built image a reference names. A reference is an image ID, or a name:
// "default" means the current default recipe's image (not an older default built by a previous
// builder version); any other name means the newest built image with that name. Nothing built
// under the reference gives IMAGE_NOT_FOUND (class errdefs.ErrNotFound).
func (s *Store) Resolve(ref string) (Image, error) {
	if ref == DefaultName {
		return s.Get(s.Default().ID())
	}
	if idPattern.MatchString(ref) {
		if img, err := s.Get(ref); !errors.Is(err, errdefs.ErrNotFound) {
			return img, err
		}
	}
	all, err := s.List()
	if err != nil {
		return Image{}, err
	}
	for _, img := range all {
		if img.Name == ref {
			return img, nil
		}
	}
	return Image{}, errdefs.Newf(errdefs.CodeImageNotFound, "image %q not found", ref)
}
