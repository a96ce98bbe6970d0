package token

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLoadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", FileName)
	tok, created, err := LoadOrCreate(path)
	if err != nil || !created || len(tok) != 64 {
		t.Fatalf("first LoadOrCreate = %q, %v, %v", tok, created, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode = %v, %v; want 0600", st.Mode().Perm(), err)
	}
	again, created, err := LoadOrCreate(path)
	if err != nil || created || again != tok {
		t.Fatalf("second LoadOrCreate = %q, %v, %v; want the same token", again, created, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreate(path); err == nil {
		t.Fatal("LoadOrCreate accepted a world-readable token file")
	}
}
