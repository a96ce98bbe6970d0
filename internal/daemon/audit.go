package daemon

import (
	"fmt"
	"path/filepath"

	"github.com/hutchdev/hutch/internal/server"
)

// AuditFile is the audit log's name in the state directory: JSON lines, one per lifecycle
// decision made through the API (see server.SetAuditLog), appended across restarts, rotated
// at server.AuditLogMaxBytes to AuditFile.1 … AuditFile.<server.AuditLogKeep>.
const AuditFile = "audit.log"

// openAuditLog opens the audit log for appending, mode 0600, bounded in size.
func openAuditLog(stateDir string) (*server.RotatingFile, error) {
	f, err := server.OpenRotatingFile(filepath.Join(stateDir, AuditFile), server.AuditLogMaxBytes, server.AuditLogKeep)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return f, nil
}
