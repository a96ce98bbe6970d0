// Package sandboxid is the sandbox ID grammar, in the one place every layer reads it: the API
// edge parses IDs with Parse; the layers below (network namespaces, OCI bundles, cgroups), which
// build paths and names from an ID, re-check it with CheckName.
//
// A sandbox ID is 1–63 characters of [a-z0-9-] with no hyphen at either end: a DNS label, so it
// works in preview host names, and lowercase only, so the same ID always reaches the same
// sandbox. A few names are reserved (Reserved).
package sandboxid

import (
	"strings"
	"unicode/utf8"

	"github.com/hutchdev/hutch/errdefs"
)

// MaxLen is the longest sandbox ID, the longest DNS label.
const MaxLen = 63

// ID is a sandbox ID that Parse accepted.
type ID string

// String returns the ID as text.
func (id ID) String() string { return string(id) }

// reserved cannot be sandbox IDs: they would clash with preview-URL host names and with words
// the API and docs use. The reference refuses www, api, admin, root, system (and its own brand
// names); we add ours.
var reserved = map[string]bool{
	"www": true, "api": true, "admin": true, "root": true, "system": true,
	"hutch": true, "default": true, "localhost": true,
}

// Reserved reports whether s is a reserved name, which the grammar allows but no sandbox may
// take.
func Reserved(s string) bool { return reserved[s] }

// Parse checks s against the grammar and the reserved names and returns it as an ID. Errors:
// INVALID_SANDBOX_ID, RESERVED_SANDBOX_ID.
func Parse(s string) (ID, error) {
	if err := CheckName(s); err != nil {
		return "", err
	}
	if reserved[s] {
		return "", errdefs.Newf(errdefs.CodeReservedSandboxID, "sandbox ID %q is reserved", s).With("id", s)
	}
	return ID(s), nil
}

// CheckName checks s against the grammar alone: the check of a layer that builds paths and
// names from an ID it was given, and of names that follow the same rule but are not sandbox IDs
// (a cgroup parent such as "hutch"). It allocates nothing for a valid name. Error:
// INVALID_SANDBOX_ID.
func CheckName(s string) error {
	switch {
	case s == "":
		return errdefs.New(errdefs.CodeInvalidSandboxID, "sandbox ID is empty: use 1-63 characters of a-z, 0-9 and '-'")
	case len(s) > MaxLen:
		return errdefs.Newf(errdefs.CodeInvalidSandboxID, "sandbox ID is %d characters long: at most 63 are allowed", len(s)).With("id", s)
	case s[0] == '-' || s[len(s)-1] == '-':
		return errdefs.New(errdefs.CodeInvalidSandboxID, "sandbox ID must not start or end with '-'").With("id", s)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			r, _ := utf8.DecodeRuneInString(s[i:])
			return errdefs.Newf(errdefs.CodeInvalidSandboxID, "sandbox ID has the character %q at byte %d: only a-z, 0-9 and '-' are allowed", r, i).With("id", strings.ToValidUTF8(s, "\uFFFD"))
		}
	}
	return nil
}
