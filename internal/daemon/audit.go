package daemon

import (
	"fmt"
	"path/filepath"

	"github.com/hutchdev/hutch/internal/config"
	"github.com/hutchdev/hutch/internal/logbound"
)

// AuditFile is the audit log's name in the state directory: JSON lines, one per lifecycle
// decision made through the API (see server.SetAuditLog), appended across restarts, rotated
// at cfg.AuditLogMaxBytes to AuditFile.1 … AuditFile.<cfg.AuditLogFiles>.
const AuditFile = "audit.log"

// openAuditLog opens the audit log for appending, mode 0600, bounded in size.
func openAuditLog(cfg config.Config) (*logbound.RotatingFile, error) {
	f, err := logbound.OpenRotatingFile(filepath.Join(cfg.StateDir, AuditFile), int64(cfg.AuditLogMaxBytes), cfg.AuditLogFiles)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return f, nil
}
