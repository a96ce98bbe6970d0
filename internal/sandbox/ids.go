package sandbox

import "github.com/hutchdev/hutch/internal/sandboxid"

// ValidateID checks a sandbox ID at the API edge: the grammar and reserved names of
// internal/sandboxid (1–63 characters of [a-z0-9-], no hyphen at either end, not reserved).
// Errors: INVALID_SANDBOX_ID, RESERVED_SANDBOX_ID.
func ValidateID(id string) error {
	_, err := sandboxid.Parse(id)
	return err
}
