package v1

import "time"

// BackupRequest is the body of POST /v1/sandboxes/{id}/backups (the reference system's
// createBackup()): hutchd streams the agent's tar of Dir through zstd into its blob store.
// Dir is absolute, no "..", no NUL, equal to or below /workspace, /home, /tmp, /var/tmp or
// /app; Name at most 256 characters without control characters; TTL seconds from 1 to
// 315360000 (default 259200, 3 days). Excludes are globs: without "/" they match a name at any
// depth, with "/" the path relative to Dir, a trailing "/" only directories. Gitignore also
// leaves out what git ignores in Dir (a warning, not an error, when that cannot be done).
// Errors: 400 INVALID_BACKUP_CONFIG; 404 FILE_NOT_FOUND; 500 BACKUP_CREATE_FAILED.
type BackupRequest struct {
	Dir       string   `json:"dir"`
	Name      string   `json:"name,omitempty"`
	TTL       *float64 `json:"ttl,omitempty"`
	Excludes  []string `json:"excludes,omitempty"`
	Gitignore bool     `json:"gitignore,omitempty"`
}

// Backup is a backup's record; the handle to keep is {id, dir}.
type Backup struct {
	// ID is a UUID.
	ID string `json:"id"`
	// SandboxID is the sandbox it was taken in; Dir the directory archived.
	SandboxID string `json:"sandboxId"`
	Dir       string `json:"dir"`
	Name      string `json:"name,omitempty"`
	// SizeBytes is the compressed archive's size.
	SizeBytes int64     `json:"sizeBytes"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Warnings are set only in createBackup's reply (a gitignore that could not be applied).
	Warnings []string `json:"warnings,omitempty"`
}

// BackupReply is the reply of createBackup (201) and getBackup: {success, …Backup,
// timestamp}.
type BackupReply struct {
	Success bool `json:"success"`
	Backup
	Timestamp time.Time `json:"timestamp"`
}

// BackupList is the reply of GET /v1/backups[?sandbox=ID], oldest first.
type BackupList struct {
	Reply
	Backups []Backup `json:"backups"`
}

// Restore modes (RestoreBackupRequest.Mode).
const (
	// RestoreMount: Dir becomes a copy-on-write mount of the backup's tree, extracted once per
	// host and shared; it lasts across sleep and restarts. The default where the host can.
	RestoreMount = "mount"
	// RestoreCopy: extracted next to Dir and swapped in; on failure Dir is unchanged.
	RestoreCopy = "copy"
)

// RestoreBackupRequest is the body of POST /v1/sandboxes/{id}/backups/{bid}/restore (the
// reference system's restoreBackup()): into the backup's own dir by default, or any allowed
// Dir, in any sandbox. Errors: 404 BACKUP_NOT_FOUND; 400 BACKUP_EXPIRED,
// INVALID_BACKUP_CONFIG; 507 NO_SPACE; 500 BACKUP_RESTORE_FAILED.
type RestoreBackupRequest struct {
	Dir  string `json:"dir,omitempty"`
	Mode string `json:"mode,omitempty"`
}

// RestoreResult is the outcome of a restore: the backup, the directory restored into
// (symlinks resolved in the sandbox), the mode used and the time taken in milliseconds.
type RestoreResult struct {
	ID         string  `json:"id"`
	Dir        string  `json:"dir"`
	Mode       string  `json:"mode"`
	DurationMs float64 `json:"durationMs"`
}

// RestoreBackupReply is the reply of restore: {success, id, dir, mode, durationMs, timestamp}.
type RestoreBackupReply struct {
	Success bool `json:"success"`
	RestoreResult
	Timestamp time.Time `json:"timestamp"`
}
