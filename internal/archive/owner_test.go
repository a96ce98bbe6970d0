package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hutchdev/hutch/internal/testutil"
)

// Options.Owner maps the owners the archive records (hutchd shifting a user namespace's host
// IDs back to in-sandbox IDs); without it owners are recorded as stat reports them.
func TestOwnerMapping(t *testing.T) {
	testutil.RequiresRoot(t, "chown to arbitrary IDs")
	src := t.TempDir()
	f := filepath.Join(src, "f")
	writeFile(t, f, "x", 0o644)
	if err := os.Lchown(f, 1<<20+1000, 1<<20+5); err != nil {
		t.Fatal(err)
	}
	owners := func(opts Options) map[string][2]int {
		var buf bytes.Buffer
		if _, err := Write(context.Background(), &buf, src, opts); err != nil {
			t.Fatal(err)
		}
		out := map[string][2]int{}
		tr := tar.NewReader(&buf)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(h.Name)] = [2]int{h.Uid, h.Gid}
		}
		return out
	}
	if got := owners(Options{})["f"]; got != [2]int{1<<20 + 1000, 1<<20 + 5} {
		t.Errorf("unmapped owner %v", got)
	}
	shift := func(uid, gid int) (int, int) { return uid - 1<<20, gid - 1<<20 }
	if got := owners(Options{Owner: shift})["f"]; got != [2]int{1000, 5} {
		t.Errorf("mapped owner %v; want [1000 5]", got)
	}
}
