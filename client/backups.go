package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	v1 "github.com/hutchdev/hutch/api/v1"
)

// Backup is a directory backup: its handle ({ID, Dir}) and record. A handle stays valid across
// sandboxes (and hosts sharing hutchd's blob store) until it expires or is deleted.
type Backup = v1.Backup

// BackupOptions are the parameters of CreateBackup.
type BackupOptions struct {
	// Dir is the absolute directory to back up; it must be (or be below) /workspace, /home,
	// /tmp, /var/tmp or /app, and must not contain "..".
	Dir string
	// Name is an optional label: at most 256 characters, no control characters.
	Name string
	// TTL is how long the backup is kept, 1 s to 10 years (else INVALID_BACKUP_CONFIG); 0
	// means the server's default (3 days). Expired backups cannot be restored and are
	// garbage-collected.
	TTL time.Duration
	// Excludes are glob patterns of entries to leave out: a pattern without "/" matches a base
	// name at any depth ("node_modules", "*.log"); one with "/" matches the path relative to
	// Dir ("build/*.o"; a leading "/" is ignored); a trailing "/" matches directories
	// only. '*' does not cross '/'.
	Excludes []string
	// Gitignore also leaves out what git ignores in Dir (git ls-files --others --ignored
	// --exclude-standard). When git is missing or Dir is not in a work tree, nothing is left
	// out and Backup.Warnings says so.
	Gitignore bool
}

// RestoreResult is what RestoreBackup restored where.
type RestoreResult = v1.RestoreResult

// RestoreOptions are the parameters of RestoreBackupWith.
type RestoreOptions struct {
	// Dir is the directory to restore into; "" means the backup's own Dir.
	Dir string
	// Mode is "mount" (Dir becomes a copy-on-write view of the backup: the archive is extracted
	// once per host and shared, so a restore costs a mount; it persists across sleep and
	// restarts and snapshots include it), "copy" (the archive is extracted into the sandbox's
	// disk) or "" (mount where the host supports it, else copy).
	Mode string
}

// CreateBackup archives opts.Dir of the sandbox (tar + zstd) into hutchd's blob store and
// returns the backup (POST /v1/sandboxes/{id}/backups). The call returns once the archive and
// its record are stored; it starts the sandbox if it is stopped.
//
// Errors: INVALID_BACKUP_CONFIG (ErrInvalidArgument) for a bad dir, name, ttl or exclude
// pattern; FILE_NOT_FOUND (ErrNotFound) or NOT_DIRECTORY for dir; SANDBOX_NOT_FOUND;
// BACKUP_CREATE_FAILED (ErrInternal) when the archive could not be read or stored.
func (s *Sandbox) CreateBackup(ctx context.Context, opts BackupOptions) (Backup, error) {
	body := v1.BackupRequest{Dir: opts.Dir, Name: opts.Name, Excludes: opts.Excludes, Gitignore: opts.Gitignore}
	if opts.TTL != 0 {
		secs := opts.TTL.Seconds()
		body.TTL = &secs
	}
	var b Backup
	if err := s.do(ctx, http.MethodPost, "/backups", body, &b); err != nil {
		return Backup{}, fmt.Errorf("back up %s of sandbox %q: %w", opts.Dir, s.sandboxID, err)
	}
	return b, nil
}

// RestoreBackup replaces the content of dir in the sandbox with backup backupID's (POST
// /v1/sandboxes/{id}/backups/{bid}/restore); dir "" means the backup's own Dir. The backup may
// come from any sandbox. It starts the sandbox if it is stopped. By default the host mounts the
// backup at dir (see RestoreOptions.Mode: instant whatever the size, and lasting); in copy mode
// the new content is extracted next to dir and swapped in, so on error dir is left as it was.
//
// Errors: BACKUP_NOT_FOUND (ErrNotFound); BACKUP_EXPIRED (ErrFailedPrecondition);
// INVALID_BACKUP_CONFIG for dir; NO_SPACE (ErrResourceExhausted) when the sandbox's disk is
// full; NOT_DIRECTORY when dir is a file; SANDBOX_NOT_FOUND; BACKUP_RESTORE_FAILED (ErrInternal).
func (s *Sandbox) RestoreBackup(ctx context.Context, backupID, dir string) (RestoreResult, error) {
	return s.RestoreBackupWith(ctx, backupID, RestoreOptions{Dir: dir})
}

// RestoreBackupWith is RestoreBackup with options. Errors: those of RestoreBackup, and
// INVALID_BACKUP_CONFIG for an unknown mode or "mount" where the host cannot mount.
func (s *Sandbox) RestoreBackupWith(ctx context.Context, backupID string, opts RestoreOptions) (RestoreResult, error) {
	body := v1.RestoreBackupRequest{Dir: opts.Dir, Mode: opts.Mode}
	var r RestoreResult
	if err := s.do(ctx, http.MethodPost, "/backups/"+url.PathEscape(backupID)+"/restore", body, &r); err != nil {
		return RestoreResult{}, fmt.Errorf("restore backup %s into sandbox %q: %w", backupID, s.sandboxID, err)
	}
	return r, nil
}

// ListBackups returns the backups recorded by hutchd (GET /v1/backups), of sandboxID only when
// it is not empty, oldest first. Expired backups are listed until the garbage collector
// removes them.
func (c *Client) ListBackups(ctx context.Context, sandboxID string) ([]Backup, error) {
	var q url.Values
	if sandboxID != "" {
		q = url.Values{"sandbox": {sandboxID}}
	}
	var reply v1.BackupList
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/backups", query: q}, &reply); err != nil {
		return nil, fmt.Errorf("list backups: %w", err)
	}
	return reply.Backups, nil
}

// GetBackup returns backup id's record (GET /v1/backups/{id}). Errors: BACKUP_NOT_FOUND.
func (c *Client) GetBackup(ctx context.Context, id string) (Backup, error) {
	var b Backup
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/backups/" + url.PathEscape(id)}, &b); err != nil {
		return Backup{}, fmt.Errorf("get backup %s: %w", id, err)
	}
	return b, nil
}

// DeleteBackup removes backup id: its archive and record (DELETE /v1/backups/{id}).
// Errors: BACKUP_NOT_FOUND.
func (c *Client) DeleteBackup(ctx context.Context, id string) error {
	if err := c.call(ctx, request{method: http.MethodDelete, path: "/v1/backups/" + url.PathEscape(id)}, nil); err != nil {
		return fmt.Errorf("delete backup %s: %w", id, err)
	}
	return nil
}
