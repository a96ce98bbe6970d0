package blob

import (
	"strings"

	"github.com/hutchdev/hutch/errdefs"
)

// MaxKeyLen is the longest valid key, in bytes.
const MaxKeyLen = 512

// MaxSegmentLen is the longest valid key segment (between slashes), in bytes: a file name on
// local storage.
const MaxSegmentLen = 255

// ValidateKey reports whether key is a valid blob key: 1 to MaxKeyLen bytes of [A-Za-z0-9._/-],
// slash-separated segments of at most MaxSegmentLen bytes that are neither empty nor start with
// "." (so no leading or trailing
// "/", no "//", no "." or ".." segment, no hidden names: those are reserved for uploads in
// progress). The error is an errdefs error with code VALIDATION_FAILED.
func ValidateKey(key string) error {
	if key == "" {
		return badKey(key, "is empty")
	}
	return validatePath(key, false)
}

// validatePrefix checks a List prefix: empty, or a key's beginning (a trailing "/" is fine).
func validatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return validatePath(prefix, true)
}

func validatePath(s string, prefix bool) error {
	if len(s) > MaxKeyLen {
		return badKey(s, "is longer than 512 bytes")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '/' || c == '-'
		if !ok {
			return badKey(s, "has a character outside [A-Za-z0-9._/-]")
		}
	}
	segs := strings.Split(s, "/")
	if prefix && len(segs) > 1 && segs[len(segs)-1] == "" {
		segs = segs[:len(segs)-1] // "layers/" lists a directory
	}
	for _, seg := range segs {
		if seg == "" {
			return badKey(s, "has an empty segment (leading, trailing or double \"/\")")
		}
		if len(seg) > MaxSegmentLen {
			return badKey(s, "has a segment longer than 255 bytes")
		}
		if seg[0] == '.' {
			return badKey(s, "has a segment starting with \".\"")
		}
	}
	return nil
}

func badKey(key, why string) error {
	if len(key) > 80 {
		key = key[:80] + "…"
	}
	return errdefs.Newf(errdefs.CodeInvalidArgument, "invalid blob key %q: %s", key, why).With("key", key)
}
