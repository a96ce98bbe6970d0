package blob

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/testutil"
)

func localHarness() harness {
	return harness{
		open: func(t *testing.T) Store {
			l, err := NewLocal(filepath.Join(t.TempDir(), "blobs"), nil)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		leftovers: func(t *testing.T, s Store) []string {
			return localTempFiles(t, s.(*Local).Dir())
		},
	}
}

// localTempFiles returns the temp files under dir.
func localTempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && isTemp(d.Name()) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLocalConformance(t *testing.T) { runConformance(t, localHarness()) }

func TestLocalPermissions(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	s := localHarness().open(t).(*Local)
	put(t, s, "layers/sub/x.tar.zst", []byte("x"))
	for p, want := range map[string]fs.FileMode{
		s.Dir():                                        0o700 | fs.ModeDir,
		filepath.Join(s.Dir(), "layers"):               0o700 | fs.ModeDir,
		filepath.Join(s.Dir(), "layers/sub"):           0o700 | fs.ModeDir,
		filepath.Join(s.Dir(), "layers/sub/x.tar.zst"): 0o600,
	} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
	if d := s.Describe(); d != "local:"+s.Dir() {
		t.Errorf("Describe = %q", d)
	}
}

func TestLocalDeletePrunesEmptyDirs(t *testing.T) {
	s := localHarness().open(t).(*Local)
	put(t, s, "a/b/c/blob", []byte("x"))
	put(t, s, "a/keep", []byte("x"))
	if err := s.Delete(testCtx(t), "a/b/c/blob"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), "a/b")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a/b still there after its last blob went: %v", err)
	}
	if err := s.Delete(testCtx(t), "a/keep"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a still there: %v", err)
	}
	if _, err := os.Stat(s.Dir()); err != nil {
		t.Errorf("the store root was removed: %v", err)
	}
}

func TestLocalKeyConflict(t *testing.T) {
	s := localHarness().open(t)
	put(t, s, "meta/a", []byte("x"))
	put(t, s, "layers/d/e", []byte("x"))
	for _, k := range []string{"meta/a/b", "layers/d"} {
		_, err := s.Put(testCtx(t), k, strings.NewReader("y"), 1)
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Put(%q) over another key's path = %v, want VALIDATION_FAILED", k, err)
		}
	}
	if left := localTempFiles(t, s.(*Local).Dir()); len(left) > 0 {
		t.Fatalf("left %v", left)
	}
}

func TestLocalStaleTemp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blobs")
	s, err := NewLocal(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, "backups/real.tar.zst", []byte("real"))
	stale := filepath.Join(dir, "backups", tempPrefix+"111")
	fresh := filepath.Join(dir, "backups", tempPrefix+"222")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	// Temp files are never listed.
	list, err := s.List(testCtx(t), "")
	if err != nil || len(list) != 1 || list[0].Key != "backups/real.tar.zst" {
		t.Fatalf("List = %v, %v", list, err)
	}
	// Open removes the stale one and keeps the one still being written.
	if _, err := Open(testCtx(t), Config{Kind: KindLocal, Local: LocalConfig{Dir: dir}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale temp file survived Open: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temp file removed: %v", err)
	}
	n, err := s.RemoveStaleTemp(testCtx(t), 0)
	if err != nil || n != 1 {
		t.Fatalf("RemoveStaleTemp(0) = %d, %v; want 1", n, err)
	}
	if b, _ := get(t, s, "backups/real.tar.zst"); string(b) != "real" {
		t.Fatal("blob damaged by cleanup")
	}
}

// TestLocalGetSurvivesReplace: an open reader keeps reading the blob it opened.
func TestLocalGetSurvivesReplace(t *testing.T) {
	s := localHarness().open(t)
	put(t, s, "meta/x", []byte("version one"))
	rc, _, err := s.Get(testCtx(t), "meta/x")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	put(t, s, "meta/x", []byte("version two, longer"))
	if err := s.Delete(testCtx(t), "meta/x"); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 64)
	n, _ := rc.Read(b)
	if string(b[:n]) != "version one" {
		t.Fatalf("open reader read %q", b[:n])
	}
}

// TestLocalDiskFull fills a small tmpfs: Put fails with NO_SPACE and leaves nothing behind.
func TestLocalDiskFull(t *testing.T) {
	testutil.RequiresRoot(t, "mount a tmpfs")
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "hutch-blob-test", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	h := harness{
		open: func(t *testing.T) Store {
			l, err := NewLocal(mnt, nil)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		leftovers: func(t *testing.T, s Store) []string { return localTempFiles(t, mnt) },
	}
	s := h.open(t)
	put(t, s, "meta/small.json", []byte("{}"))
	for _, size := range []int64{4 << 20, -1} {
		_, err := s.Put(testCtx(t), "backups/big.tar.zst", onlyReader{strings.NewReader(strings.Repeat("x", 4<<20))}, size)
		if !errdefs.IsCode(err, errdefs.CodeNoSpace) || !errors.Is(err, errdefs.ErrResourceExhausted) {
			t.Fatalf("Put on a full disk = %v (code %s), want NO_SPACE", err, errdefs.CodeOf(err))
		}
		assertAbsent(t, h, s, "backups/big.tar.zst")
	}
	if b, _ := get(t, s, "meta/small.json"); string(b) != "{}" {
		t.Fatal("existing blob damaged")
	}
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"unknown kind", Config{Kind: "ftp"}},
		{"local without dir", Config{Kind: KindLocal}},
		{"s3 without bucket", Config{Kind: KindS3, S3: S3Config{Endpoint: "127.0.0.1:1"}}},
		{"s3 bad endpoint", Config{Kind: KindS3, S3: S3Config{Endpoint: "ftp://x", Bucket: "b"}}},
		{"s3 small parts", Config{Kind: KindS3, S3: S3Config{Endpoint: "127.0.0.1:1", Bucket: "b", PartSize: 1 << 20}}},
		{"s3 bad prefix", Config{Kind: KindS3, S3: S3Config{Endpoint: "127.0.0.1:1", Bucket: "b", Prefix: "../x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Open(ctx, tc.cfg, nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("Open = %v, want VALIDATION_FAILED", err)
			}
		})
	}
	dir := filepath.Join(t.TempDir(), "d")
	s, err := Open(ctx, Config{Local: LocalConfig{Dir: dir}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*Local); !ok {
		t.Fatalf("empty kind opened %T, want *Local", s)
	}
}
