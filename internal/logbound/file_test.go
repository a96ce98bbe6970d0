package logbound

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRotatingFile: writes past the bound rotate the file (name.1 newest), at most keep
// rotated files are kept, no write is split, an existing file's size counts, and a write
// larger than the bound goes alone into a fresh file.
func TestRotatingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Repeat("o", 90)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenRotatingFile(path, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	line := func(i int) []byte { return []byte(fmt.Sprintf("record %03d %s\n", i, strings.Repeat("x", 20))) } // 32 bytes
	for i := range 10 {
		if n, err := f.Write(line(i)); err != nil || n != 32 {
			t.Fatalf("write %d: %d %v", i, n, err)
		}
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// 91 bytes, then 3 lines per file: old | 0 1 2 | 3 4 5 | 6 7 8 | 9.
	if got := read(path); got != string(line(9)) {
		t.Errorf("current = %q", got)
	}
	if got := read(path + ".1"); got != string(line(6))+string(line(7))+string(line(8)) {
		t.Errorf(".1 = %q", got)
	}
	if got := read(path + ".2"); got != string(line(3))+string(line(4))+string(line(5)) {
		t.Errorf(".2 = %q", got)
	}
	if _, err := os.Stat(path + ".3"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf(".3 exists (keep 2): %v", err)
	}
	big := []byte(strings.Repeat("b", 250) + "\n")
	if _, err := f.Write(big); err != nil {
		t.Fatal(err)
	}
	if got := read(path); got != string(big) {
		t.Errorf("oversized write: current holds %d bytes", len(got))
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mode: %v %v", st.Mode(), err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("late\n")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write after close: %v; want os.ErrClosed", err)
	}
}
