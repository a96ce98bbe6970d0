package inject

import (
	"strings"
	"testing"
)

// TestMaskPlaceholders is issue 7 finding 4 at the unit level: audited strings lose every
// placeholder's random part, whatever its case and surroundings.
func TestMaskPlaceholders(t *testing.T) {
	ph := NewPlaceholder()
	for _, tc := range []struct{ in, want string }{
		{"/p/" + ph, "/p/" + MaskedPlaceholder},
		{"/p/sk-" + ph + "/x?y", "/p/sk-" + MaskedPlaceholder + "/x?y"},
		{ph + "." + ph + ".evil.test", MaskedPlaceholder + "." + MaskedPlaceholder + ".evil.test"},
		{strings.ToLower(ph) + ".evil.test", MaskedPlaceholder + ".evil.test"},
		{"/İ/" + strings.ToUpper(ph), "/İ/" + MaskedPlaceholder},
		{"/plain/path", "/plain/path"},
		{"/p/hutchph_", "/p/" + MaskedPlaceholder},
	} {
		if got := MaskPlaceholders(tc.in); got != tc.want {
			t.Errorf("MaskPlaceholders(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
