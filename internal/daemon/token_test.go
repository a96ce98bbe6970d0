package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/config"
	"github.com/hutchdev/hutch/internal/token"
)

// TestRunRefusesBadTokenHash: hutchd in hash-only mode stops at startup, before anything else
// is set up, with an error naming the hash file and the problem, for a malformed, missing or
// group-writable hash file and for a plaintext token file left in the state directory (which
// stays in place). No token file is created.
func TestRunRefusesBadTokenHash(t *testing.T) {
	tok, _ := token.New()
	cases := []struct {
		name, hash string
		mode       os.FileMode
		plaintext  string // content of <state>/token; "" none
		want       string
	}{
		{"not a hash", "my-token\n", 0o600, "", "64 hex digits"},
		{"short", token.HashLine(tok)[:40] + "\n", 0o600, "", "64 hex digits"},
		{"other algorithm", "md5:0123456789abcdef0123456789abcdef\n", 0o600, "", `algorithm "md5"`},
		{"empty", "\n", 0o600, "", "holds no hash"},
		{"writable", token.HashLine(tok) + "\n", 0o666, "", "writable by group or others"},
		{"missing", "", 0, "", "does not exist"},
		{"plaintext matches", token.HashLine(tok) + "\n", 0o600, tok + "\n", "still holds the token in plaintext"},
		{"plaintext old", token.HashLine(tok) + "\n", 0o600, "0123456789abcdef0123456789abcdef\n", "does not match the hash"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, "state")
			hashFile := filepath.Join(dir, "token.sha256")
			if c.mode != 0 {
				if err := os.WriteFile(hashFile, []byte(c.hash), c.mode); err != nil {
					t.Fatal(err)
				}
				os.Chmod(hashFile, c.mode)
			}
			if c.plaintext != "" {
				os.MkdirAll(state, 0o711)
				os.WriteFile(filepath.Join(state, token.FileName), []byte(c.plaintext), 0o600)
			}
			cfg, err := config.Load([]string{"--state-dir", state, "--token-hash-file", hashFile}, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			err = Run(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "token") {
				t.Fatalf("Run = %v; want an error containing %q", err, c.want)
			}
			b, rerr := os.ReadFile(filepath.Join(state, token.FileName))
			if c.plaintext == "" && rerr == nil {
				t.Errorf("hash mode wrote a token file: %q", b)
			}
			if c.plaintext != "" && string(b) != c.plaintext {
				t.Errorf("the plaintext token file was changed or removed: %q, %v", b, rerr)
			}
			if entries, _ := os.ReadDir(state); len(entries) > 1 || len(entries) == 1 && c.plaintext == "" {
				t.Errorf("Run set up state before refusing: %v", entries)
			}
		})
	}
}
