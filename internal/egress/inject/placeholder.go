package inject

import (
	"crypto/rand"
	"math/big"
	"strings"
)

// Marker starts every placeholder's random part; one bytes.Index pass finds them all.
const Marker = "hutchph_"

// PlaceholderRandLen is the number of base62 characters after Marker (about 143 bits).
const PlaceholderRandLen = 24

// PlaceholderLen is len(Marker) + PlaceholderRandLen.
const PlaceholderLen = len(Marker) + PlaceholderRandLen

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewPlaceholder returns a fresh placeholder: Marker followed by 24 random base62 characters.
// Its characters survive JSON escaping, URL encoding and shells unchanged.
func NewPlaceholder() string {
	b := make([]byte, 0, PlaceholderLen)
	b = append(b, Marker...)
	max := big.NewInt(int64(len(base62)))
	for range PlaceholderRandLen {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic("inject: crypto/rand failed: " + err.Error())
		}
		b = append(b, base62[n.Int64()])
	}
	return string(b)
}

// IsPlaceholderChar reports whether c may appear in a placeholder's random part.
func IsPlaceholderChar(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
}

// MaskedPlaceholder replaces a placeholder's random part in text MaskPlaceholders returns.
const MaskedPlaceholder = Marker + "[redacted]"

// MaskPlaceholders returns s with every placeholder (Marker, matched without regard to case,
// and the base62 characters after it) replaced by MaskedPlaceholder, for strings that are
// logged or audited (paths, hosts). A string without the marker is returned as is.
func MaskPlaceholders(s string) string {
	lower := asciiLower(s)
	if !strings.Contains(lower, Marker) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(lower, Marker)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := i + len(Marker)
		for j < len(s) && IsPlaceholderChar(s[j]) {
			j++
		}
		b.WriteString(s[:i])
		b.WriteString(MaskedPlaceholder)
		s, lower = s[j:], lower[j:]
	}
}

// asciiLower lower-cases ASCII letters only, so byte offsets stay those of s.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
