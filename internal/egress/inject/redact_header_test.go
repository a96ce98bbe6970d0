package inject

import (
	"encoding/base64"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
)

// TestRedactorHeader checks one header block: values redacted, and any field whose name
// holds the secret (as sent, case-folded the way HTTP/2 and Go's canonicalisation fold it,
// partially, or in a base64 form) dropped whole; unrelated fields untouched.
func TestRedactorHeader(t *testing.T) {
	const secret = "Zq7uV2mP9xK4rT1bN8cW3yH6dL"
	r := NewRedactor(Forms([]byte(secret), []byte("[redacted:TOK]")))
	b64 := base64.RawURLEncoding.EncodeToString([]byte(secret))
	for _, tc := range []struct {
		name, key, value string
		wantKey          bool   // the field survives
		wantValue        string // its value after redaction
	}{
		{"value", "X-Echo", "Bearer " + secret, true, "Bearer [redacted:TOK]"},
		{"partial value", "X-Echo", "key " + secret[:20], true, "key [redacted:TOK]"},
		{"unrelated", "Content-Type", "text/plain", true, "text/plain"},
		{"name as sent", "X-" + secret, "1", false, ""},
		{"name canonicalised", textproto.CanonicalMIMEHeaderKey("x-" + secret), "1", false, ""},
		{"name lower-case (h2)", "x-" + strings.ToLower(secret), "1", false, ""},
		{"name upper-case", "X-" + strings.ToUpper(secret), "1", false, ""},
		{"name partial, folded", "X-" + strings.ToLower(secret[3:15]), "1", false, ""},
		{"name base64url, folded", textproto.CanonicalMIMEHeaderKey("x-" + b64), "1", false, ""},
		{"name too short a run", "X-" + strings.ToLower(secret[:MinRun(len(secret))-1]), "1", true, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{tc.key: {tc.value}, "Keep": {"kept"}}
			n := r.Header(h)
			vs, ok := h[tc.key]
			if ok != tc.wantKey {
				t.Fatalf("field %q kept = %v, want %v (header %v)", tc.key, ok, tc.wantKey, h)
			}
			if ok && vs[0] != tc.wantValue {
				t.Fatalf("value %q, want %q", vs[0], tc.wantValue)
			}
			if h.Get("Keep") != "kept" {
				t.Fatalf("unrelated field changed: %v", h)
			}
			changed := !ok || vs[0] != tc.value
			if (n > 0) != changed {
				t.Fatalf("count %d, changed %v", n, changed)
			}
		})
	}
	var none *Redactor
	h := http.Header{"X-" + secret: {secret}}
	if none.Header(h) != 0 || len(h["X-"+secret]) != 1 || h["X-"+secret][0] != secret { //nolint:staticcheck // SA1008: the raw, non-canonical key is the case under test
		t.Fatal("a nil Redactor changed the header")
	}
}
