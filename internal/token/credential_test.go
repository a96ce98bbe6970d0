package token

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadCredential: without a hash file the token is created in <state>/token (0600) and
// read back on the next start, and the sum is the token's SHA-256; with one, a token file left
// in the state dir is refused and, once gone, only the hash is loaded. Each start logs its mode.
func TestLoadCredential(t *testing.T) {
	state := t.TempDir()
	tokPath := filepath.Join(state, FileName)
	hashFile := filepath.Join(t.TempDir(), "h")
	if err := os.WriteFile(hashFile, []byte(HashLine("other")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var first string
	for _, c := range []struct {
		name     string
		hashFile string
		before   func()
		check    func(Credential) bool
		log      string // "" = an error
	}{
		{name: "created", check: func(c Credential) bool {
			first = c.Token
			return len(c.Token) == 64 && c.Sum == Sum(c.Token) && c.Where == tokPath
		}, log: `msg="created API token" path=` + tokPath},
		{name: "read back", check: func(c Credential) bool { return c.Token == first && c.Sum == Sum(first) && c.Where == tokPath },
			log: `msg="using API token" path=` + tokPath},
		{name: "hash-only with a token file", hashFile: hashFile},
		{name: "hash-only", hashFile: hashFile, before: func() { os.Remove(tokPath) },
			check: func(c Credential) bool {
				return c.Token == "" && c.Sum == Sum("other") && c.Where == "sha256 in "+hashFile
			},
			log: `msg="API token: hash-only mode, no token file" hash_file=` + hashFile},
	} {
		if c.before != nil {
			c.before()
		}
		var buf bytes.Buffer
		cred, err := LoadCredential(state, c.hashFile, slog.New(slog.NewTextHandler(&buf, nil)))
		if c.log == "" {
			if err == nil {
				t.Errorf("%s: LoadCredential = %+v; want an error", c.name, cred)
			}
			continue
		}
		if err != nil || !c.check(cred) {
			t.Errorf("%s: LoadCredential = %+v, %v", c.name, cred, err)
		}
		if !strings.Contains(buf.String(), c.log) {
			t.Errorf("%s: log %q; want %q", c.name, buf.String(), c.log)
		}
	}
	if _, err := os.Stat(tokPath); err == nil {
		t.Error("hash-only mode wrote a token file")
	}
}
