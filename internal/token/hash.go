package token

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// HashPrefix starts a hash line: "sha256:" and 64 hex digits.
const HashPrefix = "sha256:"

// maxHashFile is the most bytes read of a hash file: one line and some comments.
const maxHashFile = 4 << 10

// New returns a fresh token: 32 bytes from crypto/rand, hex-encoded (64 characters).
func New() (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return hex.EncodeToString(raw), nil
}

// Sum is the SHA-256 of tok with surrounding white space removed, as hutchd compares it.
func Sum(tok string) [sha256.Size]byte { return sha256.Sum256([]byte(strings.TrimSpace(tok))) }

// HashLine is tok's hash line: HashPrefix and the lowercase hex SHA-256 of tok (trimmed), the
// form a hash file holds and ParseHash reads.
func HashLine(tok string) string {
	sum := Sum(tok)
	return HashPrefix + hex.EncodeToString(sum[:])
}

// ParseHash reads a token hash: 64 hex digits (either case), optionally after "sha256:",
// surrounding white space ignored. Anything else is an error saying what was expected.
func ParseHash(s string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	v := strings.TrimSpace(s)
	if len(v) >= len(HashPrefix) && strings.EqualFold(v[:len(HashPrefix)], HashPrefix) {
		v = v[len(HashPrefix):]
	} else if algo, _, ok := strings.Cut(v, ":"); ok && len(algo) < 16 {
		return sum, fmt.Errorf("not a token hash: algorithm %q is not supported: want sha256:<64 hex digits>", algo)
	}
	if len(v) != 2*sha256.Size {
		return sum, fmt.Errorf("not a token hash: want sha256:<64 hex digits> (hutch token hash prints one), got %d characters", len(v))
	}
	if _, err := hex.Decode(sum[:], []byte(v)); err != nil {
		return sum, fmt.Errorf("not a token hash: want sha256:<64 hex digits> (hutch token hash prints one): %w", err)
	}
	return sum, nil
}

// LoadHash reads the token hash file at path: one hash (ParseHash); blank lines and lines
// starting with '#' are skipped. The file must be a regular file no one but its owner can
// write (whoever can replace the hash can choose the token); it need not be secret, the
// token's 256 random bits make the hash useless for guessing. Errors name the file and the
// problem: missing, unreadable, writable by others, empty, several hashes, malformed.
func LoadHash(path string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return sum, fmt.Errorf("token hash file %s does not exist (make one with: hutch token new --hash-file %s)", path, path)
		}
		return sum, fmt.Errorf("token hash file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return sum, fmt.Errorf("token hash file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return sum, fmt.Errorf("token hash file %s is not a regular file", path)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return sum, fmt.Errorf("token hash file %s has mode %o: it must not be writable by group or others (chmod go-w)", path, st.Mode().Perm())
	}
	if st.Size() > maxHashFile {
		return sum, fmt.Errorf("token hash file %s is %d bytes: want one line sha256:<64 hex digits>", path, st.Size())
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return sum, fmt.Errorf("token hash file: %w", err)
	}
	var lines []string
	for l := range strings.Lines(string(b)) {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	switch len(lines) {
	case 0:
		return sum, fmt.Errorf("token hash file %s holds no hash: want one line sha256:<64 hex digits>", path)
	case 1:
	default:
		return sum, fmt.Errorf("token hash file %s holds %d lines: want one hash", path, len(lines))
	}
	sum, err = ParseHash(lines[0])
	if err != nil {
		return sum, fmt.Errorf("token hash file %s: %w", path, err)
	}
	return sum, nil
}

// CheckNoPlaintext makes sure the token file at path (the state directory's FileName) does not
// exist, for hutchd in hash-only mode: an old token file is refused, never deleted, because
// it may be the operator's only copy of the token. The error says whether the file's token
// matches want (the configured hash) and what to do.
func CheckNoPlaintext(path string, want [sha256.Size]byte) error {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("token hash mode: %s exists but cannot be read (%w): remove it", path, err)
	}
	if Sum(string(b)) == want {
		return fmt.Errorf("token hash mode: %s still holds the token in plaintext (it matches the hash): keep a copy where your clients need it, then delete the file", path)
	}
	return fmt.Errorf("token hash mode: %s holds an old plaintext token that does not match the hash and no longer works: delete the file", path)
}
