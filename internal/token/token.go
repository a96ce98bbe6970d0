// Package token creates and reads hutchd's API token: 32 random bytes, hex-encoded, in a file of
// mode 0600 in the state directory. The token is made once, on first start, and kept. In the
// hash-only mode (hash.go) hutchd is given only the token's SHA-256 and keeps no token on disk.
package token

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FileName is the token file's name inside the state directory.
const FileName = "token"

// LoadOrCreate returns the token stored at path, creating it (and reporting created) when the
// file does not exist. A token file readable by others than its owner is refused: the token
// grants full control of every sandbox.
func LoadOrCreate(path string) (tok string, created bool, err error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		st, serr := os.Stat(path)
		if serr != nil {
			return "", false, fmt.Errorf("token: %w", serr)
		}
		if st.Mode().Perm()&0o077 != 0 {
			return "", false, fmt.Errorf("token file %s has mode %o: it must be 0600", path, st.Mode().Perm())
		}
		t := strings.TrimSpace(string(b))
		if len(t) < 32 {
			return "", false, fmt.Errorf("token file %s holds no valid token", path)
		}
		return t, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", false, fmt.Errorf("token: %w", err)
	}
	t, err := New()
	if err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o711); err != nil {
		return "", false, fmt.Errorf("token: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("token: %w", err)
	}
	if _, err := f.WriteString(t + "\n"); err != nil {
		f.Close()
		return "", false, fmt.Errorf("token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", false, fmt.Errorf("token: %w", err)
	}
	return t, true, nil
}
