package secret

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/store"
)

func TestKeyFileCreatedPrivateAndReused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys", "master.key")
	b1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || st.Size() != KeySize {
		t.Fatalf("key file mode %v size %d", st.Mode().Perm(), st.Size())
	}
	if dst, _ := os.Stat(filepath.Dir(path)); dst.Mode().Perm() != 0o700 {
		t.Fatalf("key dir mode %v", dst.Mode().Perm())
	}
	sealed := b1.Seal([]byte("hello world"), []byte("ad"))
	b2, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b2.Open(sealed, []byte("ad"))
	if err != nil || string(got) != "hello world" {
		t.Fatalf("reopen with reloaded key: %q %v", got, err)
	}
	// A world-readable key is refused, never silently used or replaced.
	os.Chmod(path, 0o644)
	if _, err := LoadOrCreateKey(path); err == nil {
		t.Fatal("0644 key accepted")
	}
	os.Chmod(path, 0o600)
	os.WriteFile(path, []byte("short"), 0o600)
	if _, err := LoadOrCreateKey(path); err == nil {
		t.Fatal("short key accepted")
	}
}

func TestSealOpenRejectsTamperingAndWrongContext(t *testing.T) {
	b, err := LoadOrCreateKey(filepath.Join(t.TempDir(), "k"))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := LoadOrCreateKey(filepath.Join(t.TempDir(), "k"))
	sealed := b.Seal([]byte("value-123456"), []byte("secret:A"))
	if bytes.Contains(sealed, []byte("value-123456")) {
		t.Fatal("sealed value contains the plaintext")
	}
	if again := b.Seal([]byte("value-123456"), []byte("secret:A")); bytes.Equal(again, sealed) {
		t.Fatal("two seals of one value are equal (nonce reuse)")
	}
	flipped := append([]byte(nil), sealed...)
	flipped[len(flipped)-1] ^= 1
	for name, tc := range map[string]struct {
		box    *Box
		sealed []byte
		ad     string
	}{
		"wrong ad":  {b, sealed, "secret:B"},
		"tampered":  {b, flipped, "secret:A"},
		"other key": {other, sealed, "secret:A"},
		"truncated": {b, sealed[:10], "secret:A"},
		"empty":     {b, nil, "secret:A"},
	} {
		if _, err := tc.box.Open(tc.sealed, []byte(tc.ad)); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}

func newTestStore(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "hutch.db")
	db, err := store.Open(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	box, err := LoadOrCreateKey(filepath.Join(dir, "keys", "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	return NewStore(db, box), dir
}

func TestStoreLifecycleAndEncryptionAtRest(t *testing.T) {
	ctx := context.Background()
	s, dir := newTestStore(t)
	const value = "ghp_SuperSecretTokenValue_0123456789"
	if _, err := s.Set(ctx, "GITHUB_TOKEN", []byte(value)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Value(ctx, "GITHUB_TOKEN")
	if err != nil || string(got) != value {
		t.Fatalf("Value = %q, %v", got, err)
	}
	// A fresh Store (no cache) opens it from the database.
	fresh := NewStore(s.db, s.box)
	if got, err := fresh.Value(ctx, "GITHUB_TOKEN"); err != nil || string(got) != value {
		t.Fatalf("fresh Value = %q, %v", got, err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "GITHUB_TOKEN" || list[0].UpdatedAt.IsZero() {
		t.Fatalf("List = %+v, %v", list, err)
	}
	// Rotation replaces the value.
	if _, err := s.Set(ctx, "GITHUB_TOKEN", []byte(value+"-rotated")); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Value(ctx, "GITHUB_TOKEN"); string(got) != value+"-rotated" {
		t.Fatalf("rotated value (cached store) = %q", got)
	}
	if got, _ := NewStore(s.db, s.box).Value(ctx, "GITHUB_TOKEN"); string(got) != value+"-rotated" {
		t.Fatalf("rotated value (fresh store) = %q", got)
	}
	// Nothing under the state dir (database, WAL, key dir) holds the value in clear.
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, []byte(value)) {
			t.Errorf("%s contains the secret value in clear", p)
		}
		return nil
	})
	if err := s.Delete(ctx, "GITHUB_TOKEN"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Value(ctx, "GITHUB_TOKEN"); !errdefs.IsCode(err, errdefs.CodeSecretNotFound) {
		t.Fatalf("Value after Delete: %v", err)
	}
	if err := s.Delete(ctx, "GITHUB_TOKEN"); !errdefs.IsCode(err, errdefs.CodeSecretNotFound) {
		t.Fatalf("second Delete: %v", err)
	}
}

func TestStoreRejectsBadNamesAndValues(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	long := bytes.Repeat([]byte("a"), MaxValueLen+1)
	for _, tc := range []struct {
		name  string
		value []byte
	}{
		{"", []byte("longenough")},
		{"1ABC", []byte("longenough")},
		{"A-B", []byte("longenough")},
		{"A B", []byte("longenough")},
		{"A.B", []byte("longenough")},
		{"${x}", []byte("longenough")},
		{string(bytes.Repeat([]byte("A"), MaxNameLen+1)), []byte("longenough")},
		{"OK", []byte("short")},
		{"OK", long},
		{"OK", []byte("line1\r\nX-Evil: 1")},
		{"OK", []byte("nul\x00inside!")},
		{"OK", []byte("\xff\xfe\xfdnotutf8")},
	} {
		_, err := s.Set(ctx, tc.name, tc.value)
		if !errdefs.IsCode(err, errdefs.CodeInvalidSecret) {
			t.Errorf("Set(%q, %d bytes) = %v, want INVALID_SECRET", tc.name, len(tc.value), err)
		}
		if err != nil && len(tc.value) >= 8 && bytes.Contains([]byte(err.Error()), tc.value) {
			t.Errorf("error echoes the value: %v", err)
		}
	}
	if list, _ := s.List(ctx); len(list) != 0 {
		t.Fatalf("rejected secrets were stored: %+v", list)
	}
}
