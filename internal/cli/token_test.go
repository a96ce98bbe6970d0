package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/token"
)

// TestTokenCommands: hutch token new prints a fresh 64-hex token and writes its hash line,
// which token.LoadHash reads back as the token's hash; hutch token hash prints the same line
// for the token on stdin; bad input is a usage error.
func TestTokenCommands(t *testing.T) {
	hashFile := filepath.Join(t.TempDir(), "token.sha256")
	r := run(t, "http://127.0.0.1:1", "", "token", "new", "--hash-file", hashFile)
	tok := strings.TrimSpace(r.stdout)
	if r.code != 0 || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(tok) {
		t.Fatalf("token new = %d %q %q", r.code, r.stdout, r.stderr)
	}
	sum, err := token.LoadHash(hashFile)
	if err != nil || sum != token.Sum(tok) {
		t.Fatalf("LoadHash(hash file) = %x, %v; want the token's hash", sum, err)
	}
	b, _ := os.ReadFile(hashFile)
	h := run(t, "http://127.0.0.1:1", tok+"\n", "token", "hash")
	if h.code != 0 || h.stdout != string(b) || !strings.HasPrefix(h.stdout, "sha256:") {
		t.Fatalf("token hash = %d %q; want the hash file's line %q", h.code, h.stdout, b)
	}
	if again := run(t, "http://127.0.0.1:1", "", "token", "new", "--hash-file", hashFile); again.code == 0 {
		t.Fatalf("token new over an existing hash file succeeded")
	}
	if b2, _ := os.ReadFile(hashFile); string(b2) != string(b) {
		t.Fatalf("the refused token new changed the hash file")
	}
	other := run(t, "http://127.0.0.1:1", "", "token", "new", "--hash-file", hashFile, "--force")
	if other.code != 0 || strings.TrimSpace(other.stdout) == tok {
		t.Fatalf("token new --force = %d %q", other.code, other.stdout)
	}
	if plain := run(t, "http://127.0.0.1:1", "", "token", "new"); plain.code != 0 || len(strings.TrimSpace(plain.stdout)) != 64 {
		t.Fatalf("token new without a hash file = %d %q", plain.code, plain.stdout)
	}
	for _, in := range []string{"", "  \n", "two words\n"} {
		if bad := run(t, "http://127.0.0.1:1", in, "token", "hash"); bad.code != ExitUsage {
			t.Errorf("token hash with stdin %q = %d; want %d", in, bad.code, ExitUsage)
		}
	}
}
