// Package backup implements directory backups of sandboxes: a directory is archived by the
// sandbox's agent (an uncompressed tar, POST /api/backup/archive), compressed by hutchd with
// zstd (klauspost/compress, multi-threaded encoder) while it streams into the blob store, and
// described by a small metadata record; a restore streams the archive back through a zstd
// decoder into the agent (POST /api/backup/extract), which swaps the directory's content.
//
// Storage: the archive is the blob "backups/<id>.tar.zst", the record the blob
// "backups/<id>.json" (Meta) plus a row in SQLite (store.Backup) for listing. The archive is
// written first, then the meta blob, then the row, so a failure or a kill -9 part way leaves
// no meta and the backup does not exist; the archive left behind (an orphan) is removed by GC
// once it is older than Config.OrphanAge. A backup is looked up by ID in SQLite, else through
// its meta blob, so a handle taken on another host that shares the blob store restores too.
// Delete removes row, meta and archive in that order (each step can be retried).
//
// Concurrency: the backups and restores of one sandbox run one at a time, in call order;
// different sandboxes run in parallel. No temporary file is written on the host: the data
// streams agent → encoder → blob store and blob store → decoder → agent.
package backup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"path"
	"runtime"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agentclient"
	"github.com/hutchdev/hutch/internal/archive"
	"github.com/hutchdev/hutch/internal/blob"
	"github.com/hutchdev/hutch/internal/sandboxid"
	"github.com/hutchdev/hutch/internal/store"
)

// Limits and defaults.
const (
	// DefaultTTL is how long a backup is kept when the request gives no ttl (3 days).
	DefaultTTL = 72 * time.Hour
	// MinTTL and MaxTTL bound a request's ttl (1 s … 10 years of 365 days).
	MinTTL = time.Second
	MaxTTL = 10 * 365 * 24 * time.Hour
	// MaxNameLen is the longest backup name, in characters.
	MaxNameLen = 256
	// DefaultOrphanAge is Config.OrphanAge's default.
	DefaultOrphanAge = time.Hour
	// Format is the archive format recorded in Meta.
	Format = "tar+zstd"
)

// AllowedRoots are the directories a backup may be taken of or restored into (or below). The
// agent checks them again after resolving symlinks in the sandbox (archive.ResolveDir).
var AllowedRoots = archive.AllowedRoots

// Agents reaches sandbox agents; *sandbox.Manager implements it. Ensure starts the sandbox if
// needed and returns the client of its agent.
type Agents interface {
	Ensure(ctx context.Context, id sandboxid.ID) (*agentclient.Client, error)
}

// Config configures a Service.
type Config struct {
	Blobs  blob.Store
	Store  *store.Store
	Agents Agents
	// EncoderThreads is the zstd encoder's concurrency; 0 means runtime.NumCPU().
	EncoderThreads int
	// OrphanAge is how old an archive without meta must be before GC removes it; 0 means
	// DefaultOrphanAge.
	OrphanAge time.Duration
	Logger    *slog.Logger // nil: slog.Default()
	// Trees and Mounter make ModeMount available: trees are extracted into Trees (OpenTrees,
	// the cache the sandbox manager mounts again at each start) and mounted by Mounter. Nil
	// (either): restores copy.
	Trees   *Trees
	Mounter Mounter
	// HostArchive makes Create read directories from the host instead of asking the sandbox's
	// agent (except with gitignore, which needs git inside the sandbox): hutchd's own CPUs
	// archive the tree, not the sandbox's CPU quota. Nil: the agent archives.
	HostArchive DirOpener
	// Now is the clock of backups' createdAt and expiresAt and of GC's archive ages; nil:
	// time.Now. Temp files and cached trees age by the wall clock whatever it is.
	Now func() time.Time
}

// Service creates, restores, lists, deletes and garbage-collects backups. It is safe for
// concurrent use.
type Service struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	locks    map[string]*sandboxLock // sandbox ID → lock; guarded by mu
	inflight map[string]bool         // backup IDs being created; guarded by mu

	trees   *Trees    // Config.Trees; nil when mounts are off
	mounter Mounter   // Config.Mounter; nil when mounts are off
	opener  DirOpener // Config.HostArchive
}

type sandboxLock struct {
	mu   sync.Mutex
	refs int
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.EncoderThreads <= 0 {
		cfg.EncoderThreads = runtime.NumCPU()
	}
	if cfg.OrphanAge <= 0 {
		cfg.OrphanAge = DefaultOrphanAge
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Service{cfg: cfg, log: log, locks: map[string]*sandboxLock{}, inflight: map[string]bool{}, opener: cfg.HostArchive}
	if cfg.Trees != nil && cfg.Mounter != nil {
		s.trees, s.mounter = cfg.Trees, cfg.Mounter
	}
	return s
}

// lock serialises the operations on one sandbox. It returns the unlock function, or ctx's
// error if ctx ends while waiting.
func (s *Service) lock(ctx context.Context, sandboxID string) (func(), error) {
	s.mu.Lock()
	l := s.locks[sandboxID]
	if l == nil {
		l = &sandboxLock{}
		s.locks[sandboxID] = l
	}
	l.refs++
	s.mu.Unlock()
	release := func() {
		s.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(s.locks, sandboxID)
		}
		s.mu.Unlock()
	}
	got := make(chan struct{})
	go func() { l.mu.Lock(); close(got) }()
	select {
	case <-got:
		return func() { l.mu.Unlock(); release() }, nil
	case <-ctx.Done():
		go func() { <-got; l.mu.Unlock(); release() }()
		return nil, fmt.Errorf("backup: waiting for the sandbox's other backup or restore: %w", ctx.Err())
	}
}

// Backup is a backup's public record. The handle a caller keeps is {id, dir}.
type Backup struct {
	ID        string // UUID
	SandboxID string // the sandbox it was taken in
	Dir       string // the directory archived (for Restore: restored into)
	Name      string
	SizeBytes int64 // the compressed archive's size in bytes
	CreatedAt time.Time
	ExpiresAt time.Time
	// Warnings are notes of Create (a gitignore that could not be applied); not stored.
	Warnings []string
}

// Meta is the metadata blob "backups/<id>.json".
type Meta struct {
	ID        string    `json:"id"`
	SandboxID string    `json:"sandboxId"`
	Dir       string    `json:"dir"`
	Name      string    `json:"name,omitempty"`
	SizeBytes int64     `json:"sizeBytes"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	Format    string    `json:"format"` // Format
}

// CreateRequest is the input of Create.
type CreateRequest struct {
	// Dir is the absolute directory to back up, under one of AllowedRoots.
	Dir string
	// Name is an optional label: at most 256 characters, no control characters.
	Name string
	// TTL is how long the backup is kept, in seconds (MinTTL … MaxTTL, fractions allowed); nil
	// means DefaultTTL.
	TTL *float64
	// Excludes are glob patterns of entries to leave out (syntax: package archive).
	Excludes []string
	// Gitignore also leaves out what git ignores in Dir (a warning, not an error, when git
	// is missing or Dir is not in a work tree).
	Gitignore bool
}

func archiveKey(id string) string { return "backups/" + id + ".tar.zst" }
func metaKey(id string) string    { return "backups/" + id + ".json" }

func invalid(format string, a ...any) *errdefs.Error {
	return errdefs.Newf(errdefs.CodeInvalidBackupConfig, format, a...)
}

// ValidateDir checks a backup or restore directory: absolute, no ".." element, no NUL, at
// most 4096 bytes, equal to or below one of AllowedRoots. It returns the cleaned path; errors
// are INVALID_BACKUP_CONFIG with context {dir}.
func ValidateDir(dir string) (string, error) {
	switch {
	case dir == "":
		return "", invalid("dir is required").With("dir", dir)
	case strings.IndexByte(dir, 0) >= 0:
		return "", invalid("dir contains a NUL byte").With("dir", strings.ReplaceAll(dir, "\x00", `\0`))
	case len(dir) > 4096:
		return "", invalid("dir is longer than 4096 bytes").With("dir", dir[:64]+"…")
	case !strings.HasPrefix(dir, "/"):
		return "", invalid("dir %q must be an absolute path", dir).With("dir", dir)
	}
	for _, elem := range strings.Split(dir, "/") {
		if elem == ".." {
			return "", invalid("dir %q must not contain \"..\"", dir).With("dir", dir)
		}
	}
	clean := path.Clean(dir)
	for _, root := range AllowedRoots {
		if clean == root || strings.HasPrefix(clean, root+"/") {
			return clean, nil
		}
	}
	return "", invalid("dir %q is not under an allowed root (%s)", dir, strings.Join(AllowedRoots, ", ")).
		With("dir", dir).With("allowedRoots", AllowedRoots)
}

// validateCreate checks req and returns the clean dir and the TTL.
func validateCreate(req CreateRequest) (string, time.Duration, error) {
	dir, err := ValidateDir(req.Dir)
	if err != nil {
		return "", 0, err
	}
	if n := len([]rune(req.Name)); n > MaxNameLen {
		return "", 0, invalid("name is %d characters long; the limit is %d", n, MaxNameLen)
	}
	if strings.IndexFunc(req.Name, unicode.IsControl) >= 0 {
		return "", 0, invalid("name must not contain control characters")
	}
	ttl := DefaultTTL
	if req.TTL != nil {
		secs := *req.TTL
		// The comparison is false for NaN, so NaN is refused too; within the bounds the
		// conversion to nanoseconds cannot overflow.
		if !(secs >= MinTTL.Seconds() && secs <= MaxTTL.Seconds()) {
			return "", 0, invalid("ttl must be a number of seconds from %v to %v (10 years), got %v",
				MinTTL.Seconds(), MaxTTL.Seconds(), secs).With("ttl", secs)
		}
		ttl = time.Duration(secs * float64(time.Second))
	}
	if err := archive.ValidatePatterns(req.Excludes); err != nil {
		return "", 0, errdefs.Wrap(errdefs.CodeInvalidBackupConfig, err, "excludes")
	}
	return dir, ttl, nil
}

// newID returns a random (version 4) UUID.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// validID reports whether id has the UUID form newID makes (any version, lower case).
func validID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i, c := range id {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

func notFound(id string) error {
	return errdefs.Newf(errdefs.CodeBackupNotFound, "backup %q not found", id).With("id", id)
}

func fromRow(r store.Backup) Backup {
	return Backup{ID: r.ID, SandboxID: r.SandboxID, Dir: r.Dir, Name: r.Name, SizeBytes: r.SizeBytes, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt}
}

func (b Backup) row() store.Backup {
	return store.Backup{ID: b.ID, SandboxID: b.SandboxID, Dir: b.Dir, Name: b.Name, SizeBytes: b.SizeBytes, CreatedAt: b.CreatedAt, ExpiresAt: b.ExpiresAt}
}

func (b Backup) meta() Meta {
	return Meta{ID: b.ID, SandboxID: b.SandboxID, Dir: b.Dir, Name: b.Name, SizeBytes: b.SizeBytes, CreatedAt: b.CreatedAt, ExpiresAt: b.ExpiresAt, Format: Format}
}

// Get returns backup id's record (expired ones too, until GC removes them): from SQLite, else
// from its meta blob. Errors: BACKUP_NOT_FOUND.
func (s *Service) Get(ctx context.Context, id string) (Backup, error) {
	if !validID(id) {
		return Backup{}, notFound(id)
	}
	row, err := s.cfg.Store.GetBackup(ctx, id)
	if err == nil {
		return fromRow(row), nil
	}
	if errdefs.CodeOf(err) != errdefs.CodeBackupNotFound {
		return Backup{}, err
	}
	m, err := s.readMeta(ctx, id)
	if err != nil {
		return Backup{}, err
	}
	return Backup{ID: m.ID, SandboxID: m.SandboxID, Dir: m.Dir, Name: m.Name, SizeBytes: m.SizeBytes, CreatedAt: m.CreatedAt, ExpiresAt: m.ExpiresAt}, nil
}

// readMeta reads the meta blob of id. Errors: BACKUP_NOT_FOUND, blob store errors.
func (s *Service) readMeta(ctx context.Context, id string) (Meta, error) {
	rc, _, err := s.cfg.Blobs.Get(ctx, metaKey(id))
	if err != nil {
		if errdefs.CodeOf(err) == errdefs.CodeBlobNotFound {
			return Meta{}, notFound(id)
		}
		return Meta{}, err
	}
	defer rc.Close()
	var m Meta
	if err := json.NewDecoder(rc).Decode(&m); err != nil {
		return Meta{}, errdefs.Wrap(errdefs.CodeInternal, err, "backup "+id+": bad meta record")
	}
	if m.ID != id || m.Format != Format {
		return Meta{}, errdefs.Newf(errdefs.CodeInternal, "backup %s: meta record names id %q, format %q", id, m.ID, m.Format)
	}
	return m, nil
}

// List returns the backups recorded on this host (SQLite), of sandboxID or of all sandboxes
// when it is empty, oldest first.
func (s *Service) List(ctx context.Context, sandboxID string) ([]Backup, error) {
	rows, err := s.cfg.Store.ListBackups(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	out := make([]Backup, 0, len(rows))
	for _, r := range rows {
		out = append(out, fromRow(r))
	}
	return out, nil
}

// Delete removes backup id: its row, meta and archive. Errors: BACKUP_NOT_FOUND.
func (s *Service) Delete(ctx context.Context, id string) error {
	if _, err := s.Get(ctx, id); err != nil {
		return err
	}
	return s.remove(ctx, id)
}

// remove deletes row, meta and archive of id, in that order, then its cached tree if no
// sandbox mounts it.
func (s *Service) remove(ctx context.Context, id string) error {
	if err := s.cfg.Store.DeleteBackup(ctx, id); err != nil {
		return err
	}
	if err := s.cfg.Blobs.Delete(ctx, metaKey(id)); err != nil {
		return fmt.Errorf("backup %s: delete meta: %w", id, err)
	}
	if err := s.cfg.Blobs.Delete(ctx, archiveKey(id)); err != nil {
		return fmt.Errorf("backup %s: delete archive: %w", id, err)
	}
	// Its extracted tree goes too, unless a sandbox mounts it (then it is part of that disk).
	if s.trees != nil {
		if used, err := s.cfg.Store.MountedBackups(ctx); err == nil && !used[id] {
			if err := s.trees.trees.Remove(id); err != nil {
				s.log.WarnContext(ctx, "remove the tree of a deleted backup", "backup_id", id, "err", err)
			}
		}
	}
	return nil
}
