package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agentapi"
	"github.com/hutchdev/hutch/internal/archive"
	"github.com/hutchdev/hutch/internal/idmap"
	"github.com/hutchdev/hutch/internal/pzstd"
	"github.com/hutchdev/hutch/internal/sandboxid"
)

// cleanupTimeout bounds the removal of a failed backup's blobs.
const cleanupTimeout = 30 * time.Second

// DirOpener opens a sandbox's directory from the host (*sandbox.Manager implements it): see
// Config.HostArchive.
type DirOpener interface {
	OpenDir(ctx context.Context, id sandboxid.ID, dir string, roots []string) (*os.Root, string, error)
	// IDMap is the sandbox's user namespace ID range (the zero Map without one): the host
	// sees its files owned by host IDs, which the archive records as in-sandbox IDs.
	IDMap(ctx context.Context, id sandboxid.ID) (idmap.Map, error)
}

// Create backs up directory req.Dir of sandbox sandboxID (starting the sandbox if needed) and
// returns the new backup's record. The archive (archive.WriteRoot's format) streams from the
// host's view of the directory (Config.HostArchive) or from the agent, through the zstd encoder,
// into the blob store; no temporary file is written.
//
// Errors: INVALID_BACKUP_CONFIG (dir, also when the agent finds it resolves outside
// AllowedRoots through a symlink; name; ttl outside MinTTL…MaxTTL; excludes), SANDBOX_NOT_FOUND and the other
// errors of starting a sandbox, FILE_NOT_FOUND or NOT_DIRECTORY (dir), AGENT_UNAVAILABLE,
// BACKUP_CREATE_FAILED (the archive stream or the blob store failed; context.cause is the
// underlying code), ctx's error wrapped. On any error nothing of the backup is left but
// possibly an archive blob without meta, which GC removes.
func (s *Service) Create(ctx context.Context, sandboxID string, req CreateRequest) (Backup, error) {
	dir, ttl, err := validateCreate(req)
	if err != nil {
		return Backup{}, err
	}
	unlock, err := s.lock(ctx, sandboxID)
	if err != nil {
		return Backup{}, err
	}
	defer unlock()
	sid, err := sandboxid.Parse(sandboxID)
	if err != nil {
		return Backup{}, err
	}
	agent, err := s.cfg.Agents.Ensure(ctx, sid)
	if err != nil {
		return Backup{}, err
	}
	defer s.hold(sid)()
	id := newID()
	s.setInflight(id, true)
	defer s.setInflight(id, false)

	start := time.Now()
	var src io.Reader
	var finish func() error // reports whether the tar stream was complete
	var warnings []string
	where := "agent"
	if s.opener != nil && !req.Gitignore {
		where = "host"
		idm, err := s.opener.IDMap(ctx, sid)
		if err != nil {
			return Backup{}, err
		}
		root, _, err := s.opener.OpenDir(ctx, sid, dir, AllowedRoots)
		if err != nil {
			return Backup{}, err
		}
		defer root.Close()
		var stop func()
		src, finish, stop = hostArchive(ctx, root, req.Excludes, idm)
		defer stop() // before root.Close

	} else {
		a, err := agent.Archive(ctx, agentapi.ArchiveRequest{Dir: dir, Excludes: req.Excludes, Gitignore: req.Gitignore})
		if err != nil {
			return Backup{}, err
		}
		defer a.Body.Close()
		src, finish, warnings = a.Body, a.Complete, a.Warnings
	}
	b := Backup{ID: id, SandboxID: sandboxID, Dir: dir, Name: req.Name, CreatedAt: s.cfg.Now().UTC(), Warnings: warnings}
	b.ExpiresAt = b.CreatedAt.Add(ttl)

	// source → zstd → pipe → blob store.
	pr, pw := io.Pipe()
	var tarBytes int64
	done := make(chan error, 1)
	go func() {
		err := s.compress(pw, src, finish, &tarBytes)
		pw.CloseWithError(err)
		done <- err
	}()
	n, err := s.cfg.Blobs.Put(ctx, archiveKey(id), pr, -1)
	pr.CloseWithError(errPutEnded) // a Put that gave up early must not block the encoder
	if cerr := <-done; cerr != nil && !errors.Is(cerr, errPutEnded) {
		err = cerr // the source's failure explains the Put's
	}
	if err != nil {
		s.cleanup(id, false)
		return Backup{}, createFailed(ctx, dir, err)
	}
	b.SizeBytes = n

	meta, _ := json.Marshal(b.meta())
	if _, err := s.cfg.Blobs.Put(ctx, metaKey(id), bytes.NewReader(meta), int64(len(meta))); err != nil {
		s.cleanup(id, true)
		return Backup{}, createFailed(ctx, dir, fmt.Errorf("write meta: %w", err))
	}
	if err := s.cfg.Store.InsertBackup(ctx, b.row()); err != nil {
		s.cleanup(id, true)
		return Backup{}, createFailed(ctx, dir, fmt.Errorf("record backup: %w", err))
	}
	s.log.InfoContext(ctx, "backup created", "backup_id", id, "sandbox_id", sandboxID, "dir", dir, "read_by", where,
		"tar_bytes", tarBytes, "size_bytes", n, "duration", time.Since(start).Round(time.Millisecond))
	return b, nil
}

// errPutEnded closes the pipe's read side once Put has returned.
var errPutEnded = errors.New("blob put ended")

// compress copies the tar stream src into w through a zstd encoder; the archive is complete
// only when finish (called once src is drained) says so.
func (s *Service) compress(w io.Writer, src io.Reader, finish func() error, tarBytes *int64) error {
	enc, err := pzstd.NewWriter(w, s.cfg.EncoderThreads, zstd.SpeedFastest)
	if err != nil {
		return fmt.Errorf("zstd encoder: %w", err)
	}
	n, err := enc.ReadFrom(src)
	*tarBytes = n
	if err != nil {
		enc.Close()
		return fmt.Errorf("read archive: %w", err)
	}
	if err := finish(); err != nil {
		enc.Close()
		return err
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("zstd: %w", err)
	}
	return nil
}

// hostArchive streams the tar of root (archive.WriteRoot) through a pipe, owners shifted from
// the host IDs of idm's range to in-sandbox IDs (IDs outside it become idmap.Overflow); finish returns the
// writer's error once the stream is drained; stop ends the writer early (if it still runs) and
// waits for it, so root can be closed.
func hostArchive(ctx context.Context, root *os.Root, excludes []string, idm idmap.Map) (src io.Reader, finish func() error, stop func()) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	opts := archive.Options{Excludes: excludes, Owner: idm.SandboxOwner()}
	go func() {
		_, err := archive.WriteRoot(ctx, pw, root, opts)
		pw.CloseWithError(err)
		done <- err
	}()
	var once sync.Once
	var result error
	wait := func() error { once.Do(func() { result = <-done }); return result }
	return pr, wait, func() { pr.CloseWithError(errPutEnded); _ = wait() }
}

// createFailed classifies a failure after the archive stream started.
func createFailed(ctx context.Context, dir string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("backup of %s: %w", dir, ctx.Err())
	}
	return errdefs.Wrap(errdefs.CodeBackupCreateFailed, err, "backup of "+dir+" failed").
		With("dir", dir).With("cause", string(errdefs.CodeOf(err)))
}

// cleanup removes what a failed Create wrote (the meta first, so the backup never exists
// without its archive). Errors are logged; GC catches what is left.
func (s *Service) cleanup(id string, withMeta bool) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout) //nolint:forbidigo // cleanup runs after the request failed or was cancelled
	defer cancel()
	if withMeta {
		if err := s.cfg.Blobs.Delete(ctx, metaKey(id)); err != nil {
			s.log.Warn("backup: removing the meta of a failed backup", "backup_id", id, "err", err)
		}
	}
	if err := s.cfg.Blobs.Delete(ctx, archiveKey(id)); err != nil {
		s.log.Warn("backup: removing the archive of a failed backup", "backup_id", id, "err", err)
	}
}

func (s *Service) setInflight(id string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.inflight[id] = true
	} else {
		delete(s.inflight, id)
	}
}

func (s *Service) isInflight(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight[id]
}

// hold keeps the sandbox awake for the operation when the Agents implementation supports it
// (sandbox.Manager.Hold); it returns the release function.
func (s *Service) hold(id sandboxid.ID) func() {
	if h, ok := s.cfg.Agents.(interface{ Hold(id sandboxid.ID) func() }); ok {
		return h.Hold(id)
	}
	return func() {}
}
