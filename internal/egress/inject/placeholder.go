package inject

import (
	"crypto/rand"
	"math/big"
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
