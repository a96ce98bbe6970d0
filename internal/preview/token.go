package preview

import (
	"crypto/rand"
	"encoding/base64"
	"strings"

	"github.com/hutchdev/hutch/errdefs"
)

// MaxTokenLen is the longest token: 16 characters of [a-z0-9_].
const MaxTokenLen = 16

// MinCustomTokenLen is the shortest token a caller may choose. The reference system allows 1,
// but a token is the only credential of a preview URL: under 8 characters (41 bits) it can be
// guessed by trying.
const MinCustomTokenLen = 8

// NewToken returns a fresh random token: 12 bytes from crypto/rand as unpadded base64url, '-'
// turned into '_', lowercased: 16 characters of [a-z0-9_] (about 84 bits of entropy).
func NewToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes the program instead)
	s := base64.RawURLEncoding.EncodeToString(b[:])
	return strings.ToLower(strings.ReplaceAll(s, "-", "_"))
}

// ValidToken reports whether s is 1–16 characters of [a-z0-9_].
func ValidToken(s string) bool {
	if s == "" || len(s) > MaxTokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// ValidateToken checks a caller's custom token: MinCustomTokenLen–MaxTokenLen characters of
// [a-z0-9_]. Error: INVALID_PORT_TOKEN.
func ValidateToken(s string) error {
	if !ValidToken(s) || len(s) < MinCustomTokenLen {
		return errdefs.Newf(errdefs.CodeBadPortToken, "a port token is %d-%d characters of a-z, 0-9 and '_'", MinCustomTokenLen, MaxTokenLen)
	}
	return nil
}
