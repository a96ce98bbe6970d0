package server

import (
	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/internal/backup"
)

// This file maps the backup domain types to and from their api/v1 wire form. (A backup's
// stored form is backup.Meta, the metadata blob; it keeps its own JSON tags.)

func toBackup(b backup.Backup) v1.Backup {
	return v1.Backup{ID: b.ID, SandboxID: b.SandboxID, Dir: b.Dir, Name: b.Name, SizeBytes: b.SizeBytes,
		CreatedAt: b.CreatedAt, ExpiresAt: b.ExpiresAt, Warnings: b.Warnings}
}

// toBackups maps a list; nil becomes empty ("backups": [], as before).
func toBackups(in []backup.Backup) []v1.Backup {
	out := make([]v1.Backup, len(in))
	for i, b := range in {
		out[i] = toBackup(b)
	}
	return out
}

func fromBackupRequest(r v1.BackupRequest) backup.CreateRequest {
	return backup.CreateRequest{Dir: r.Dir, Name: r.Name, TTL: r.TTL, Excludes: r.Excludes, Gitignore: r.Gitignore}
}
