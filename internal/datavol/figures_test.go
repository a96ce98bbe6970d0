package datavol

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// createFiles writes n 100-byte files into dir (100 per subdirectory) and then syncs the file
// system. It returns the time of each phase.
func createFiles(t *testing.T, dir string, n int) (create, sync time.Duration) {
	t.Helper()
	data := make([]byte, 100)
	start := time.Now()
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d", i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	create = time.Since(start)
	start = time.Now()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	return create, time.Since(start)
}

// TestCreateFilesFigures logs how long creating 5,000 small files takes on t.TempDir()'s file
// system and on data volumes with and without direct I/O on the loop device. It asserts
// nothing about time: the figures are for reading in -v output.
func TestCreateFilesFigures(t *testing.T) {
	e := newEnv(t)
	const n = 5000
	host := filepath.Join(e.dir, "host")
	if err := os.Mkdir(host, 0o755); err != nil {
		t.Fatal(err)
	}
	c, s := createFiles(t, host, n)
	t.Logf("%d files on the host file system (%s): create %v, syncfs %v", n, e.dir, c, s)

	defer func(old bool) { directIO = old }(directIO)
	for _, dio := range []bool{true, false} {
		directIO = dio
		v := e.ensure(e.config(fmt.Sprintf("dio-%v", dio), 256<<20))
		c, s := createFiles(t, filepath.Join(v.Path()), n)
		t.Logf("%d files on a data volume (direct I/O %v): create %v, syncfs %v", n, dio, c, s)
		if err := v.Unmount(); err != nil {
			t.Fatal(err)
		}
	}
}
