package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

func TestRecipeID(t *testing.T) {
	base := DefaultRecipe()
	if got, again := base.ID(), DefaultRecipe().ID(); got != again || len(got) != 16 {
		t.Fatalf("default ID unstable or wrong length: %q vs %q", got, again)
	}
	reordered := base
	reordered.Packages = slices.Clone(base.Packages)
	slices.Reverse(reordered.Packages)
	reordered.Packages = append(reordered.Packages, "git", " ")
	otherMirror := base
	otherMirror.Mirror = "http://mirror.example/debian"
	otherMirror.Name = "renamed"
	for name, r := range map[string]Recipe{"reordered+dup": reordered, "mirror+name": otherMirror} {
		if r.ID() != base.ID() {
			t.Errorf("%s: ID %s, want %s", name, r.ID(), base.ID())
		}
	}
	morePkgs := base
	morePkgs.Packages = append(slices.Clone(base.Packages), "jq")
	otherSuite := base
	otherSuite.Suite = "trixie"
	for name, r := range map[string]Recipe{"more packages": morePkgs, "other suite": otherSuite} {
		if r.ID() == base.ID() {
			t.Errorf("%s: same ID %s as default", name, r.ID())
		}
	}
}

func TestGetMissing(t *testing.T) {
	s := NewStore(t.TempDir(), nil)
	for _, ref := range []string{"0123456789abcdef", "../etc", "default", "nope"} {
		if _, err := s.Resolve(ref); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Resolve(%q) = %v, want ErrNotFound", ref, err)
		}
	}
	var e *errdefs.Error
	if _, err := s.Get("0123456789abcdef"); !errors.As(err, &e) || e.Code != errdefs.CodeImageNotFound {
		t.Errorf("Get: %v, want IMAGE_NOT_FOUND", err)
	}
	if imgs, err := s.List(); err != nil || len(imgs) != 0 {
		t.Errorf("List of empty store = %v, %v", imgs, err)
	}
}

func TestStoreListsPublishedImagesOnly(t *testing.T) {
	dir := t.TempDir()
	s := NewStore(dir, nil)
	write := func(name, json string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, name, "rootfs"), 0o755); err != nil {
			t.Fatal(err)
		}
		if json != "" {
			if err := os.WriteFile(filepath.Join(dir, name, "image.json"), []byte(json), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("aaaaaaaaaaaaaaaa", `{"id":"aaaaaaaaaaaaaaaa","name":"py","createdAt":"2026-01-01T00:00:00Z"}`)
	write("bbbbbbbbbbbbbbbb", `{"id":"bbbbbbbbbbbbbbbb","name":"py","createdAt":"2026-02-01T00:00:00Z"}`)
	write(".tmp-cccccccccccccccc-1", `{"id":"cccccccccccccccc"}`)
	write("dddddddddddddddd", "") // incomplete: no metadata
	imgs, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 2 || imgs[0].ID != "bbbbbbbbbbbbbbbb" || imgs[1].ID != "aaaaaaaaaaaaaaaa" {
		t.Fatalf("List = %+v", imgs)
	}
	if imgs[0].RootFS != filepath.Join(dir, "bbbbbbbbbbbbbbbb", "rootfs") {
		t.Errorf("RootFS = %q", imgs[0].RootFS)
	}
	for ref, want := range map[string]string{"py": "bbbbbbbbbbbbbbbb", "aaaaaaaaaaaaaaaa": "aaaaaaaaaaaaaaaa"} {
		if img, err := s.Resolve(ref); err != nil || img.ID != want {
			t.Errorf("Resolve(%q) = %s, %v; want %s", ref, img.ID, err, want)
		}
	}
}

func TestLockFileSerialises(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".lock-x")
	unlock, err := lockFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := lockFile(ctx, path); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock while held: %v, want deadline exceeded", err)
	}
	got := make(chan error, 1)
	go func() {
		u, err := lockFile(context.Background(), path)
		if err == nil {
			u()
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond)
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter did not get the lock after unlock")
	}
}

func TestTailWriter(t *testing.T) {
	tw := &tailWriter{w: errWriter{}, max: 2}
	for _, s := range []string{"one\ntw", "o\nthree\n", "four"} {
		if n, err := tw.Write([]byte(s)); err != nil || n != len(s) {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if got := tw.tail(); got != "two\nthree\nfour" {
		t.Fatalf("tail = %q", got)
	}
}

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("gone") }
