package token

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHashLineRoundTrip(t *testing.T) {
	tok, err := New()
	if err != nil || len(tok) != 64 {
		t.Fatalf("New = %q, %v", tok, err)
	}
	other, _ := New()
	if other == tok {
		t.Fatal("two New tokens are equal")
	}
	line := HashLine(tok + "\n")
	want := sha256.Sum256([]byte(tok))
	if line != "sha256:"+hex.EncodeToString(want[:]) {
		t.Fatalf("HashLine = %q", line)
	}
	for _, in := range []string{line, strings.TrimPrefix(line, "sha256:"), "  SHA256:" + strings.ToUpper(line[7:]) + "\n"} {
		got, err := ParseHash(in)
		if err != nil || got != want {
			t.Errorf("ParseHash(%q) = %x, %v; want %x", in, got, err, want)
		}
	}
}

func TestParseHashRefuses(t *testing.T) {
	good := HashLine("x")
	for _, in := range []string{"", "sha256:", good[:len(good)-1], good + "0", "md5:" + good[7:], "sha256:" + strings.Repeat("g", 64), "sha512:" + good[7:] + good[7:]} {
		if _, err := ParseHash(in); err == nil {
			t.Errorf("ParseHash(%q) accepted", in)
		}
	}
}

func TestLoadHash(t *testing.T) {
	dir := t.TempDir()
	tok, _ := New()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok", "# hutch API token\n\n"+HashLine(tok)+"\n", 0o644)
	if sum, err := LoadHash(ok); err != nil || sum != Sum(tok) {
		t.Fatalf("LoadHash(good) = %x, %v", sum, err)
	}
	for name, c := range map[string]struct {
		body string
		mode os.FileMode
		want string
	}{
		"writable": {HashLine(tok), 0o666, "writable by group or others"},
		"empty":    {"# nothing\n", 0o600, "holds no hash"},
		"two":      {HashLine(tok) + "\n" + HashLine("y") + "\n", 0o600, "holds 2 lines"},
		"plain":    {tok + "x\n", 0o600, "64 hex digits"},
		"token":    {"my-secret-token\n", 0o600, "64 hex digits"},
	} {
		_, err := LoadHash(write(name, c.body, c.mode))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("LoadHash(%s) = %v; want an error containing %q", name, err, c.want)
		}
	}
	if _, err := LoadHash(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("LoadHash(missing) = %v", err)
	}
	if _, err := LoadHash(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("LoadHash(dir) = %v", err)
	}
}

func TestCheckNoPlaintext(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, FileName)
	tok, _ := New()
	if err := CheckNoPlaintext(p, Sum(tok)); err != nil {
		t.Fatalf("no file: %v", err)
	}
	os.WriteFile(p, []byte(tok+"\n"), 0o600)
	if err := CheckNoPlaintext(p, Sum(tok)); err == nil || !strings.Contains(err.Error(), "matches the hash") {
		t.Errorf("matching file: %v", err)
	}
	if err := CheckNoPlaintext(p, Sum("other")); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("old file: %v", err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Errorf("the token file was removed: %v", err)
	}
}
