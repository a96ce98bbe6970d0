package sandbox

import (
	"strings"

	"github.com/hutchdev/hutch/errdefs"
)

// reservedIDs cannot be sandbox IDs: they would clash with preview-URL host names and with
// words the API and docs use. The reference refuses www, api, admin, root, system (and its own
// brand names); we add ours.
var reservedIDs = map[string]bool{
	"www": true, "api": true, "admin": true, "root": true, "system": true,
	"hutch": true, "default": true, "localhost": true,
}

// ValidateID checks a sandbox ID: 1–63 characters of [a-z0-9-], no hyphen at either end, not
// reserved (cloudflare-sandbox-api.md §1.2; our IDs are lowercase only, so the same ID always
// reaches the same sandbox and works as a DNS label). Errors: INVALID_SANDBOX_ID,
// RESERVED_SANDBOX_ID.
func ValidateID(id string) error {
	switch {
	case id == "":
		return errdefs.New(errdefs.CodeInvalidSandboxID, "sandbox ID is empty: use 1-63 characters of a-z, 0-9 and '-'")
	case len(id) > 63:
		return errdefs.Newf(errdefs.CodeInvalidSandboxID, "sandbox ID is %d characters long: at most 63 are allowed", len(id)).With("id", id)
	case strings.HasPrefix(id, "-") || strings.HasSuffix(id, "-"):
		return errdefs.New(errdefs.CodeInvalidSandboxID, "sandbox ID must not start or end with '-'").With("id", id)
	}
	for i, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return errdefs.Newf(errdefs.CodeInvalidSandboxID, "sandbox ID has the character %q at byte %d: only a-z, 0-9 and '-' are allowed", c, i).With("id", strings.ToValidUTF8(id, "\uFFFD"))
		}
	}
	if reservedIDs[id] {
		return errdefs.Newf(errdefs.CodeReservedSandboxID, "sandbox ID %q is reserved", id).With("id", id)
	}
	return nil
}
