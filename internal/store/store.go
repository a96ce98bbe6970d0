// Package store keeps hutchd's metadata in SQLite (modernc.org/sqlite, no cgo): one row per
// sandbox with its options, state and network slot, and one row per exposed port (ports.go).
// The database file lives in the state directory; every write is a single transaction, so a
// `kill -9` of hutchd leaves either the old or the new row, never half of one. It is the
// embedded default; a PostgreSQL store for several hosts comes later behind the same methods.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hutchdev/hutch/errdefs"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// MaxNetSlots is the number of network slots (one /30 each in a /16).
const MaxNetSlots = 16384

// DefaultSleepAfter is a sandbox's idle time before it sleeps when its creator set none.
const DefaultSleepAfter = 10 * time.Minute

// Sandbox is one sandbox's record.
type Sandbox struct {
	ID           string
	Image        string // image ID
	ImageName    string // name the caller asked for ("default")
	InstanceType string
	EnvVars      map[string]string
	// Status is the lifecycle state, as text: internal/sandbox owns the states and the moves
	// between them (SetStatus writes them).
	Status    string
	NetSlot   int
	LastError string
	CreatedAt time.Time
	StartedAt time.Time // zero when never started
	UpdatedAt time.Time
	// SleepAfter is the idle time after which the sandbox sleeps (0 in Insert means
	// DefaultSleepAfter); KeepAlive disables sleeping. See sleep.go.
	SleepAfter time.Duration
	KeepAlive  bool
	// Layers are the snapshot layers below the sandbox's own disk, newest first, as digests
	// ("sha256-<hex>"); empty for a sandbox on its image alone. Snapshot is the snapshot they
	// came from ("" when none). See snapshots.go.
	Layers   []string
	Snapshot string
	// SnapshotOnSleep: every sleep snapshots the sandbox's disk. LastSnapshot is the ID of the
	// last such snapshot, LastSnapshotError the error of the last one that failed ("" after a
	// success). See sleep.go.
	SnapshotOnSleep   bool
	LastSnapshot      string
	LastSnapshotError string
	// Runtime is the isolation backend the sandbox runs on ("runc", "gvisor"); Insert stores
	// "runc" for "". Rows from before the column have "runc".
	Runtime string
	// UserNS asks Insert for a user namespace: IDBase is then the first host ID of the
	// sandbox's own range of IDRangeSize IDs (in-sandbox ID n is host ID IDBase+n), chosen by
	// Insert (idmap.go). IDBase 0 means no user namespace (root inside is root on the host).
	UserNS bool
	IDBase uint32
}

// Store is the SQLite metadata store. It is safe for concurrent use.
type Store struct {
	db *sql.DB
}

// schema is version 0 of every table. New columns of existing tables go in migrations (below),
// never here, so fresh and old databases end up the same; new tables may be added here.
const schema = `
CREATE TABLE IF NOT EXISTS sandboxes (
	id            TEXT PRIMARY KEY,
	image         TEXT NOT NULL,
	image_name    TEXT NOT NULL,
	instance_type TEXT NOT NULL,
	env_json      TEXT NOT NULL,
	status        TEXT NOT NULL,
	net_slot      INTEGER NOT NULL UNIQUE,
	last_error    TEXT NOT NULL DEFAULT '',
	created_at    INTEGER NOT NULL,
	started_at    INTEGER NOT NULL DEFAULT 0,
	updated_at    INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS exposed_ports (
	sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,
	port       INTEGER NOT NULL,
	token      TEXT NOT NULL,
	name       TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	PRIMARY KEY (sandbox_id, port),
	UNIQUE (sandbox_id, token)
);
CREATE TABLE IF NOT EXISTS backups (
	id         TEXT PRIMARY KEY,
	sandbox_id TEXT NOT NULL,
	dir        TEXT NOT NULL,
	name       TEXT NOT NULL DEFAULT '',
	size_bytes INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS backups_by_sandbox ON backups (sandbox_id, created_at);
`

// Open opens (creating if needed) the database at path.
func Open(ctx context.Context, path string) (*Store, error) {
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// The records hold sandboxes' env vars, which may be secrets: owner only.
	if err := touchPrivate(path); err != nil {
		db.Close()
		return nil, err
	}
	// One writer at a time keeps SQLite free of SQLITE_BUSY under concurrent requests.
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: migrate %s: %w", path, err)
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: migrate %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// migrations change the schema of existing databases: each runs once, in order, in a
// transaction, and PRAGMA user_version counts those applied. Append only; never edit one that
// has shipped. (schema above creates missing tables of every version with IF NOT EXISTS.)
var migrations = []string{
	// 1: sleep and wake (sleep.go): idle time before sleeping, in ms, and keepAlive.
	`ALTER TABLE sandboxes ADD COLUMN sleep_after_ms INTEGER NOT NULL DEFAULT 600000;
	 ALTER TABLE sandboxes ADD COLUMN keep_alive INTEGER NOT NULL DEFAULT 0;`,
	// 2: snapshots (snapshots.go): the snapshot layers below a sandbox's disk and their snapshot.
	`ALTER TABLE sandboxes ADD COLUMN layers_json TEXT NOT NULL DEFAULT '[]';
	 ALTER TABLE sandboxes ADD COLUMN snapshot TEXT NOT NULL DEFAULT '';`,
	// 3: snapshots at sleep.
	`ALTER TABLE sandboxes ADD COLUMN snapshot_on_sleep INTEGER NOT NULL DEFAULT 0;
	 ALTER TABLE sandboxes ADD COLUMN last_snapshot TEXT NOT NULL DEFAULT '';
	 ALTER TABLE sandboxes ADD COLUMN last_snapshot_error TEXT NOT NULL DEFAULT '';`,
	// 4: backups restored as mounts (dirmounts.go).
	`CREATE TABLE dir_mounts (
		sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,
		path       TEXT NOT NULL,
		backup_id  TEXT NOT NULL,
		mount_id   TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		PRIMARY KEY (sandbox_id, path)
	 );`,
	// 5: egress: a sandbox's policy (policy.Spec as JSON), its CA (key sealed with the
	// host key), the CA each snapshot was taken with (so sandboxes started from it keep it after
	// the source sandbox is gone), its placeholders, and the secrets (values sealed with the host
	// key).
	`CREATE TABLE egress_policies (
		sandbox_id TEXT PRIMARY KEY REFERENCES sandboxes(id) ON DELETE CASCADE,
		spec_json  TEXT NOT NULL,
		updated_at INTEGER NOT NULL
	 );
	 CREATE TABLE sandbox_cas (
		sandbox_id TEXT PRIMARY KEY REFERENCES sandboxes(id) ON DELETE CASCADE,
		cert_pem   TEXT NOT NULL,
		key_sealed BLOB NOT NULL,
		created_at INTEGER NOT NULL
	 );
	 CREATE TABLE egress_placeholders (
		sandbox_id  TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,
		secret      TEXT NOT NULL,
		placeholder TEXT NOT NULL UNIQUE,
		PRIMARY KEY (sandbox_id, secret)
	 );
	 CREATE TABLE snapshot_cas (
		snapshot_id TEXT PRIMARY KEY,
		sandbox_id  TEXT NOT NULL,
		cert_pem    TEXT NOT NULL,
		key_sealed  BLOB NOT NULL,
		created_at  INTEGER NOT NULL
	 );
	 CREATE TABLE secrets (
		name         TEXT PRIMARY KEY,
		value_sealed BLOB NOT NULL,
		created_at   INTEGER NOT NULL,
		updated_at   INTEGER NOT NULL
	 );`,
	// 6: isolation runtime per sandbox: "runc" or "gvisor".
	`ALTER TABLE sandboxes ADD COLUMN runtime TEXT NOT NULL DEFAULT 'runc';`,
	// 7: user namespaces (idmap.go): the first host ID of the sandbox's ID range, 0 = none.
	// Unique among sandboxes that have one; deleting the row releases the range.
	`ALTER TABLE sandboxes ADD COLUMN id_base INTEGER NOT NULL DEFAULT 0;
	 CREATE UNIQUE INDEX sandboxes_id_base ON sandboxes (id_base) WHERE id_base != 0;`,
}

func migrate(ctx context.Context, db *sql.DB) error {
	var version int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return err
	}
	for i := version; i < len(migrations); i++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// touchPrivate creates path (and SQLite's -wal and -shm companions) with mode 0600, or narrows
// the mode of existing files to 0600.
func touchPrivate(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		f.Close()
		if err := os.Chmod(p, 0o600); err != nil {
			return fmt.Errorf("store: %w", err)
		}
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Insert adds a new sandbox record, choosing the lowest free network slot, and returns the
// stored record. An existing ID gives errdefs.ErrAlreadyExists; no free slot gives
// errdefs.ErrResourceExhausted.
func (s *Store) Insert(ctx context.Context, sb Sandbox) (Sandbox, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Sandbox{}, fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sandboxes WHERE id = ?`, sb.ID).Scan(&n); err != nil {
		return Sandbox{}, fmt.Errorf("store: lookup %s: %w", sb.ID, err)
	}
	if n > 0 {
		return Sandbox{}, fmt.Errorf("store: sandbox %q: %w", sb.ID, errdefs.ErrAlreadyExists)
	}
	slot, err := freeSlot(ctx, tx)
	if err != nil {
		return Sandbox{}, err
	}
	sb.IDBase = 0
	if sb.UserNS {
		if sb.IDBase, err = freeIDBase(ctx, tx); err != nil {
			return Sandbox{}, err
		}
	}
	now := time.Now().UTC()
	sb.NetSlot = slot
	sb.CreatedAt, sb.UpdatedAt = now, now
	if sb.Runtime == "" {
		sb.Runtime = "runc"
	}
	if sb.EnvVars == nil {
		sb.EnvVars = map[string]string{}
	}
	if sb.SleepAfter <= 0 {
		sb.SleepAfter = DefaultSleepAfter
	}
	env, err := json.Marshal(sb.EnvVars)
	if err != nil {
		return Sandbox{}, fmt.Errorf("store: env: %w", err)
	}
	layers, err := marshalLayers(sb.Layers)
	if err != nil {
		return Sandbox{}, err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO sandboxes
		(id, image, image_name, instance_type, env_json, status, net_slot, last_error, created_at, started_at, updated_at, sleep_after_ms, keep_alive, layers_json, snapshot, snapshot_on_sleep, runtime, id_base)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sb.ID, sb.Image, sb.ImageName, sb.InstanceType, string(env), sb.Status, sb.NetSlot,
		sb.LastError, now.UnixNano(), unixNano(sb.StartedAt), now.UnixNano(), sb.SleepAfter.Milliseconds(), sb.KeepAlive,
		layers, sb.Snapshot, sb.SnapshotOnSleep, sb.Runtime, sb.IDBase)
	if err != nil {
		return Sandbox{}, fmt.Errorf("store: insert %s: %w", sb.ID, err)
	}
	if err := tx.Commit(); err != nil {
		return Sandbox{}, fmt.Errorf("store: commit: %w", err)
	}
	return sb, nil
}

func freeSlot(ctx context.Context, tx *sql.Tx) (int, error) {
	rows, err := tx.QueryContext(ctx, `SELECT net_slot FROM sandboxes ORDER BY net_slot`)
	if err != nil {
		return 0, fmt.Errorf("store: slots: %w", err)
	}
	defer rows.Close()
	want := 0
	for rows.Next() {
		var s int
		if err := rows.Scan(&s); err != nil {
			return 0, fmt.Errorf("store: slots: %w", err)
		}
		if s > want {
			break
		}
		want = s + 1
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("store: slots: %w", err)
	}
	if want >= MaxNetSlots {
		return 0, errdefs.New(errdefs.CodeUnavailable, "no free network slot: too many sandboxes on this host")
	}
	return want, nil
}

// Get returns the record of id; unknown → errdefs.CodeSandboxNotFound.
func (s *Store) Get(ctx context.Context, id string) (Sandbox, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+columns+` FROM sandboxes WHERE id = ?`, id)
	sb, err := scan(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Sandbox{}, errdefs.Newf(errdefs.CodeSandboxNotFound, "sandbox %q not found", id).With("id", id)
	}
	return sb, err
}

// List returns every record, ordered by ID.
func (s *Store) List(ctx context.Context) ([]Sandbox, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+columns+` FROM sandboxes ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	defer rows.Close()
	var out []Sandbox
	for rows.Next() {
		sb, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sb)
	}
	return out, rows.Err()
}

// StatusChange is one write of a sandbox's status (SetStatus).
type StatusChange struct {
	To        string   // the new status
	LastError string   // recorded with it; "" clears it
	From      []string // the write happens only while the recorded status is one of these
	Started   bool     // stamp StartedAt with now
}

// SetStatus writes ch on sandbox id's record if, and only if, its recorded status is one of
// ch.From (none: it never writes), in one statement: two writers cannot both move a record from
// the same status. It reports whether it wrote and, when it did not, the recorded status.
// Unknown id → errdefs.CodeSandboxNotFound.
func (s *Store) SetStatus(ctx context.Context, id string, ch StatusChange) (written bool, current string, err error) {
	now := time.Now().UTC().UnixNano()
	set := `status = ?, last_error = ?, updated_at = ?`
	args := []any{ch.To, ch.LastError, now}
	if ch.Started {
		set += `, started_at = ?`
		args = append(args, now)
	}
	args = append(args, id)
	for _, f := range ch.From {
		args = append(args, f)
	}
	if len(ch.From) > 0 {
		in := strings.TrimSuffix(strings.Repeat("?, ", len(ch.From)), ", ")
		res, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET `+set+` WHERE id = ? AND status IN (`+in+`)`, args...)
		if err != nil {
			return false, "", fmt.Errorf("store: set status %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return true, "", nil
		}
	}
	if err := s.db.QueryRowContext(ctx, `SELECT status FROM sandboxes WHERE id = ?`, id).Scan(&current); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return false, "", errdefs.Newf(errdefs.CodeSandboxNotFound, "sandbox %q not found", id).With("id", id)
		}
		return false, "", fmt.Errorf("store: set status %s: %w", id, err)
	}
	return false, current, nil
}

// Delete removes the record of id; unknown IDs are not an error.
func (s *Store) Delete(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = ?`, id); err != nil {
		return fmt.Errorf("store: delete %s: %w", id, err)
	}
	return nil
}

const columns = `id, image, image_name, instance_type, env_json, status, net_slot, last_error, created_at, started_at, updated_at, sleep_after_ms, keep_alive, layers_json, snapshot, snapshot_on_sleep, last_snapshot, last_snapshot_error, runtime, id_base`

type scanner interface{ Scan(dest ...any) error }

func scan(r scanner) (Sandbox, error) {
	var (
		sb                        Sandbox
		env                       string
		created, started, updated int64
		sleepAfterMS              int64
		layers                    string
	)
	err := r.Scan(&sb.ID, &sb.Image, &sb.ImageName, &sb.InstanceType, &env, &sb.Status, &sb.NetSlot,
		&sb.LastError, &created, &started, &updated, &sleepAfterMS, &sb.KeepAlive, &layers, &sb.Snapshot,
		&sb.SnapshotOnSleep, &sb.LastSnapshot, &sb.LastSnapshotError, &sb.Runtime, &sb.IDBase)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Sandbox{}, err
		}
		return Sandbox{}, fmt.Errorf("store: scan: %w", err)
	}
	if err := json.Unmarshal([]byte(env), &sb.EnvVars); err != nil {
		return Sandbox{}, fmt.Errorf("store: sandbox %s env: %w", sb.ID, err)
	}
	if err := json.Unmarshal([]byte(layers), &sb.Layers); err != nil {
		return Sandbox{}, fmt.Errorf("store: sandbox %s layers: %w", sb.ID, err)
	}
	sb.CreatedAt = fromNano(created)
	sb.StartedAt = fromNano(started)
	sb.UpdatedAt = fromNano(updated)
	sb.SleepAfter = time.Duration(sleepAfterMS) * time.Millisecond
	sb.UserNS = sb.IDBase != 0
	return sb, nil
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
