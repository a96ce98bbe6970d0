package files

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestResolve(t *testing.T) {
	tests := []struct {
		cwd, p, want string
		bad          bool
	}{
		{"/w", "a/b", "/w/a/b", false},
		{"/w", "/x/../y", "/y", false},
		{"/w", "../up", "/up", false},
		{"/w", "", "", true},
		{"/w", "a\x00b", "", true},
		{"/w", strings.Repeat("a", MaxPathLen+1), "", true},
	}
	for _, tt := range tests {
		got, err := Resolve(tt.cwd, tt.p)
		if tt.bad {
			if !errdefs.IsCode(err, errdefs.CodeInvalidPath) {
				t.Errorf("Resolve(%q) err = %v; want INVALID_PATH", tt.p, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Resolve(%q, %q) = %q, %v; want %q", tt.cwd, tt.p, got, err, tt.want)
		}
	}
}

func TestIsBinaryMIME(t *testing.T) {
	for mt, want := range map[string]bool{
		"text/plain": false, "application/json": false, "application/xml": false, "image/svg+xml": false,
		"text/javascript": false, "application/javascript": false, "inode/x-empty": false,
		"image/png": true, "application/octet-stream": true, "application/pdf": true,
	} {
		if got := IsBinaryMIME(mt); got != want {
			t.Errorf("IsBinaryMIME(%s) = %v; want %v", mt, got, want)
		}
	}
}

func TestWriteAtomicFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.txt")
	if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.txt")
	if err := os.Symlink("real.txt", link); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(link, strings.NewReader("new")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("link replaced: %v %v", fi, err)
	}
	b, err := os.ReadFile(target)
	fi, _ := os.Stat(target)
	if err != nil || string(b) != "new" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("target = %q %v %v", b, err, fi.Mode())
	}
}

// failingReader fails after some bytes, like a client that disconnects mid-upload.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("connection reset")
	}
	n := min(len(p), r.n)
	r.n -= n
	return n, nil
}

func TestWriteFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("intact"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Write(p, &failingReader{n: 5 << 20})
	if !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
		t.Fatalf("Write = %v; want VALIDATION_FAILED", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "intact" {
		t.Fatalf("file = %q; want the old content", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d entries; temp file left behind", len(entries))
	}
}

func TestReadNonRegular(t *testing.T) {
	_, _, err := Read("/dev/zero", 0)
	if !errdefs.IsCode(err, errdefs.CodeFilesystem) {
		t.Fatalf("Read(/dev/zero) = %v; want FILESYSTEM_ERROR", err)
	}
}
