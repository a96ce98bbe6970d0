// Package imagetest gives tests the default image from a cache shared by every test package
// and test run on the machine, so the image is built once (a few minutes) and then reused.
//
// The cache directory is $HUTCH_TEST_IMAGES when set, else /var/lib/hutch/images (the same
// place hutchd keeps its images by default). Concurrent test packages wait for one build (the
// store's file lock).
package imagetest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/image"
	"github.com/hutchdev/hutch/internal/testutil"
)

// DefaultDir is the shared cache used when HUTCH_TEST_IMAGES is unset.
const DefaultDir = "/var/lib/hutch/images"

// Dir returns the shared test image directory.
func Dir() string {
	if d := os.Getenv("HUTCH_TEST_IMAGES"); d != "" {
		return d
	}
	return DefaultDir
}

// Default returns the default image from the shared cache, building it if needed. It skips the
// test when not root or when debootstrap is missing, and fails it when the build fails. Build
// output goes to the test log only when the build fails (in the error) or with -v.
func Default(t testing.TB) image.Image {
	t.Helper()
	testutil.RequiresRoot(t, "build or use the default image")
	store := image.NewStore(Dir(), slog.New(slog.DiscardHandler))
	if img, err := store.Get(store.Default().ID()); err == nil {
		return img
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("debootstrap not installed; cannot build the default image")
	}
	t.Logf("building the default image in %s (first run on this machine takes a few minutes)", Dir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var progress io.Writer = io.Discard
	if testing.Verbose() {
		progress = os.Stderr
	}
	img, err := store.Ensure(ctx, store.Default(), progress)
	if err != nil {
		t.Fatalf("build default image: %v", err)
	}
	return img
}
