package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/sandboxid"
)

// Restore modes.
const (
	// ModeMount restores by mounting: dir becomes an overlay of the backup's tree (extracted
	// once per host into the tree cache, Trees) below a writable layer of the sandbox's own, so
	// a restore costs a mount whatever the backup's size; it persists across sleep, wake and
	// restarts, and snapshots include it (sandbox.Manager.MountBackup). The default when the
	// Service has a Mounter.
	ModeMount = "mount"
	// ModeCopy restores by extracting the archive into the sandbox (its agent writes every file
	// next to dir and swaps the directory in). The fallback where mounts are not available.
	ModeCopy = "copy"
)

// Mounter mounts backup trees into sandboxes; *sandbox.Manager implements it.
type Mounter interface {
	MountBackup(ctx context.Context, id sandboxid.ID, dir, backupID, tree string, roots []string) (string, error)
}

// Restore replaces the content of dir in sandbox sandboxID (starting it if needed) with the
// content of backup backupID; dir "" means the directory the backup was taken of. The backup
// may come from another sandbox (or another host sharing the blob store). mode is ModeMount,
// ModeCopy or "" (ModeMount when available, else ModeCopy). With ModeCopy the archive streams
// from the blob store through the zstd decoder into the agent, which extracts it next to dir
// and swaps it in: on failure dir is left as it was. It returns the backup's record with Dir
// set to the directory restored into, and the mode used.
//
// Errors: BACKUP_NOT_FOUND, BACKUP_EXPIRED (context {id, expiresAt}), INVALID_BACKUP_CONFIG
// (dir; from the agent: dir resolves outside AllowedRoots through a symlink, or has a mount
// point below it), FILE_EXISTS (something was created in dir during the swap; dir is as it
// was), SANDBOX_NOT_FOUND and the other errors of starting a sandbox, NO_SPACE and the other
// file codes of the extraction (NOT_DIRECTORY when dir is a file), AGENT_UNAVAILABLE,
// BACKUP_RESTORE_FAILED (the stored archive or the blob store failed; context.cause), ctx's
// error wrapped; INVALID_BACKUP_CONFIG for an unknown mode or ModeMount where mounts are not
// available.
func (s *Service) Restore(ctx context.Context, sandboxID, backupID, dir, mode string) (Backup, string, error) {
	switch mode {
	case "":
		mode = ModeCopy
		if s.mounter != nil {
			mode = ModeMount
		}
	case ModeMount:
		if s.mounter == nil {
			return Backup{}, "", invalid("restore mode %q is not available on this host", mode).With("mode", mode)
		}
	case ModeCopy:
	default:
		return Backup{}, "", invalid("restore mode %q: want %q or %q", mode, ModeMount, ModeCopy).With("mode", mode)
	}
	b, err := s.Get(ctx, backupID)
	if err != nil {
		return Backup{}, "", err
	}
	target := b.Dir
	if dir != "" {
		if target, err = ValidateDir(dir); err != nil {
			return Backup{}, "", err
		}
	}
	if s.cfg.Now().After(b.ExpiresAt) {
		return Backup{}, "", errdefs.Newf(errdefs.CodeBackupExpired, "backup %s expired at %s", b.ID, b.ExpiresAt.Format(time.RFC3339)).
			With("id", b.ID).With("expiresAt", b.ExpiresAt)
	}
	unlock, err := s.lock(ctx, sandboxID)
	if err != nil {
		return Backup{}, "", err
	}
	defer unlock()
	sid, err := sandboxid.Parse(sandboxID)
	if err != nil {
		return Backup{}, "", err
	}
	if mode == ModeMount {
		start := time.Now()
		tree, err := s.trees.Tree(ctx, b.ID)
		if err != nil {
			return Backup{}, "", err
		}
		fetched := time.Since(start)
		resolved, err := s.mounter.MountBackup(ctx, sid, target, b.ID, tree, AllowedRoots)
		switch {
		case err == nil:
			s.log.InfoContext(ctx, "backup restored", "backup_id", b.ID, "sandbox_id", sandboxID, "dir", resolved, "mode", mode,
				"tree", fetched.Round(time.Millisecond), "duration", time.Since(start).Round(time.Millisecond))
			b.Dir = resolved
			return b, ModeMount, nil
		case errors.Is(err, sandbox.ErrMountsUnsupported):
			s.log.InfoContext(ctx, "sandbox cannot take a mount before it restarts: restoring by copy", "sandbox_id", sandboxID)
		default:
			return Backup{}, "", err
		}
	}
	agent, err := s.cfg.Agents.Ensure(ctx, sid)
	if err != nil {
		return Backup{}, "", err
	}
	defer s.hold(sid)()
	start := time.Now()
	rc, _, err := s.cfg.Blobs.Get(ctx, archiveKey(b.ID))
	if err != nil {
		if errdefs.CodeOf(err) == errdefs.CodeBlobNotFound {
			return Backup{}, "", notFound(b.ID)
		}
		return Backup{}, "", restoreFailed(ctx, target, fmt.Errorf("open archive: %w", err))
	}
	defer rc.Close()
	dec, err := zstd.NewReader(rc)
	if err != nil {
		return Backup{}, "", restoreFailed(ctx, target, fmt.Errorf("zstd decoder: %w", err))
	}
	defer dec.Close()
	src := &sourceReader{r: dec}
	if _, err := agent.Extract(ctx, target, src); err != nil {
		if serr := src.failure(); serr != nil {
			return Backup{}, "", restoreFailed(ctx, target, serr) // the archive, not the agent, failed
		}
		if errdefs.CodeOf(err) == errdefs.CodeInvalidArgument {
			// The agent refused the archive (unsafe entry, not a tar): the stored data is bad.
			return Backup{}, "", restoreFailed(ctx, target, err)
		}
		return Backup{}, "", err
	}
	s.log.InfoContext(ctx, "backup restored", "backup_id", b.ID, "sandbox_id", sandboxID, "dir", target,
		"tar_bytes", src.count(), "duration", time.Since(start).Round(time.Millisecond))
	b.Dir = target
	return b, ModeCopy, nil
}

// sourceReader records the first read error of the decoded archive, so that a failed restore
// can be blamed on the archive rather than the agent.
type sourceReader struct {
	r  io.Reader
	mu sync.Mutex
	n  int64
	e  error
}

func (s *sourceReader) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	s.mu.Lock()
	s.n += int64(n)
	if err != nil && !errors.Is(err, io.EOF) && s.e == nil {
		s.e = err
	}
	s.mu.Unlock()
	return n, err
}

func (s *sourceReader) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.e
}

func (s *sourceReader) count() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func restoreFailed(ctx context.Context, dir string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("restore into %s: %w", dir, ctx.Err())
	}
	return errdefs.Wrap(errdefs.CodeBackupRestoreFailed, err, "restore into "+dir+" failed").
		With("dir", dir).With("cause", string(errdefs.CodeOf(err)))
}
