package blob

import (
	"errors"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestValidateKey(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"backups/0b9c1f4e-7d2a-4c1e-9a55-3f0d2b8e6a71.tar.zst", true},
		{"layers/sha256-" + strings.Repeat("0f", 32) + ".tar.zst", true},
		{"meta/my_backup.v2.json", true},
		{"a", true},
		{"a..b", true},
		{strings.Repeat("x", 255) + "/" + strings.Repeat("y", 255), true},
		{strings.Repeat("x", 255), true},
		{strings.Repeat("x", 256), false},
		{strings.Repeat("x/", 256), false},
		{strings.Repeat("x/", 256) + "a", false},
		{strings.Repeat("x/", 255) + "ab", true},
		{"", false},
		{"/a", false},
		{"a/", false},
		{"a//b", false},
		{"..", false},
		{"a/../b", false},
		{"./a", false},
		{".a", false},
		{"a/.tmp-blob-1", false},
		{"a b", false},
		{"a+b", false},
		{"é", false},
		{"a\nb", false},
	} {
		err := ValidateKey(tc.key)
		if tc.ok && err != nil {
			t.Errorf("ValidateKey(%q) = %v, want ok", tc.key, err)
		}
		if !tc.ok && (!errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.CodeOf(err) != errdefs.CodeInvalidArgument) {
			t.Errorf("ValidateKey(%q) = %v, want VALIDATION_FAILED", tc.key, err)
		}
	}
	for _, p := range []string{"", "a", "a/", "layers/sha256-", "a/b/"} {
		if err := validatePrefix(p); err != nil {
			t.Errorf("validatePrefix(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"/", "/a", "a//", "../", ".", "a/."} {
		if err := validatePrefix(p); err == nil {
			t.Errorf("validatePrefix(%q) accepted", p)
		}
	}
}
