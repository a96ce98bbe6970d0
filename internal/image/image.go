// Package image builds and stores Hutch's read-only base images.
//
// An image is a Debian root filesystem built with debootstrap from a Recipe (suite + package
// list). Its ID is a content hash of the recipe, so the same recipe always gives the same ID and
// is built once per store; the mirror is not part of the ID (any mirror serving the same suite
// gives the same image, as far as Hutch is concerned).
//
// Layout of a store directory:
//
//	<dir>/<id>/rootfs/      the root filesystem (used read-only, as an overlayfs lower dir)
//	<dir>/<id>/image.json   metadata (see Image)
//	<dir>/.lock-<id>        flock serialising builders of <id> across processes
//	<dir>/.tmp-<id>-*       in-progress builds, renamed to <dir>/<id> when complete
//
// An image directory exists only once it is complete: readers never see half-built images.
package image

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// BuilderVersion is part of every image ID. Bump it whenever the build steps change what ends
// up in an image, so old images are not reused for the new recipe.
const BuilderVersion = "1"

// DefaultName is the name of the default image.
const DefaultName = "default"

// DefaultSuite is the Debian suite of the default image.
const DefaultSuite = "bookworm"

// defaultPackages is the package list of the default image, installed on top of a debootstrap
// minbase (which already has bash, coreutils and apt).
var defaultPackages = []string{
	"bash",
	"ca-certificates",
	"coreutils",
	"curl",
	"file",
	"git",
	"ipython3",
	"nodejs",
	"npm",
	"procps",
	"python3",
	"python3-httpx",
	"python3-matplotlib",
	"python3-numpy",
	"python3-pandas",
	"python3-pip",
	"python3-requests",
}

// Recipe is what an image is built from.
type Recipe struct {
	// Name is a human name ("default"); not part of the ID.
	Name string
	// Suite is the Debian suite ("bookworm").
	Suite string
	// Mirror is the Debian mirror URL; empty means the host's own (HostMirror). Not part of
	// the ID.
	Mirror string
	// Packages are installed with apt-get --no-install-recommends after debootstrap.
	Packages []string
}

// ID returns the recipe's image ID: the first 16 hex digits of the SHA-256 of the builder
// version, the suite and the sorted, de-duplicated package list.
func (r Recipe) ID() string {
	payload, _ := json.Marshal(struct {
		Builder  string   `json:"builder"`
		Suite    string   `json:"suite"`
		Packages []string `json:"packages"`
	}{BuilderVersion, r.Suite, r.normalizedPackages()})
	sum := sha256.Sum256(payload)
	return hex.EncodeToString(sum[:])[:16]
}

func (r Recipe) normalizedPackages() []string {
	out := make([]string, 0, len(r.Packages))
	for _, p := range r.Packages {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (r Recipe) mirror() (string, error) {
	if r.Mirror == "" {
		return HostMirror(r.Suite)
	}
	return r.Mirror, nil
}

// DefaultRecipe returns the recipe of the default image: Debian bookworm with bash, coreutils,
// procps, file, git, curl, ca-certificates, python3 (+ IPython, numpy, pandas, matplotlib),
// nodejs and npm.
func DefaultRecipe() Recipe {
	return Recipe{
		Name:     DefaultName,
		Suite:    DefaultSuite,
		Packages: slices.Clone(defaultPackages),
	}
}

// Image is a built image. It is also the JSON shape of image.json.
type Image struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Suite     string    `json:"suite"`
	Packages  []string  `json:"packages"`
	CreatedAt time.Time `json:"createdAt"`
	// SizeBytes is the apparent size of the root filesystem (hard links counted once).
	SizeBytes int64 `json:"sizeBytes"`
	// BuildSeconds is how long the build took.
	BuildSeconds float64 `json:"buildSeconds"`
	// RootFS is the absolute path of the root filesystem; not stored in image.json.
	RootFS string `json:"-"`
}
