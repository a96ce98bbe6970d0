package daemon

import (
	"fmt"
	"os"
	"path/filepath"
)

// AuditFile is the audit log's name in the state directory: JSON lines, one per lifecycle
// decision made through the API (see server.SetAuditLog), appended across restarts.
const AuditFile = "audit.log"

// openAuditLog opens the audit log for appending, mode 0600.
func openAuditLog(stateDir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(stateDir, AuditFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return f, nil
}
