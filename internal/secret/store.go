package secret

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/store"
)

// Limits of names and values.
const (
	// MaxNameLen is the longest secret name, in bytes.
	MaxNameLen = 128
	// MinValueLen is the shortest value, in bytes: responses are redacted by searching for the
	// value, and a very short one would match ordinary text.
	MinValueLen = 8
	// MaxValueLen is the longest value, in bytes (tokens, keys, PEM blocks).
	MaxValueLen = 64 << 10
)

// Info is a secret's public view: never its value.
type Info struct {
	Name      string
	CreatedAt time.Time
	UpdatedAt time.Time
	// UsedBy are the IDs of the sandboxes whose egress policy references the secret (filled by
	// the API).
	UsedBy []string
}

// Store keeps secrets sealed in the metadata store and caches opened values in memory. It is
// safe for concurrent use.
type Store struct {
	db  *store.Store
	box *Box

	mu    sync.RWMutex
	cache map[string][]byte // opened values by name; only names known to exist
	gen   uint64            // bumped by every Set and Delete
}

// NewStore returns a Store over db sealing with box.
func NewStore(db *store.Store, box *Box) *Store {
	return &Store{db: db, box: box, cache: map[string][]byte{}}
}

// Box returns the Store's sealing box (also used for CA keys).
func (s *Store) Box() *Box { return s.box }

// ValidateName checks a secret name: 1–128 bytes of [A-Za-z0-9_], not starting with a digit
// (the shape of an environment variable, so "${secrets.NAME}" templates and placeholder env
// vars can use it as is). Error: INVALID_SECRET.
func ValidateName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return errdefs.Newf(errdefs.CodeInvalidSecret, "secret name must be 1-%d characters", MaxNameLen).With("name", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9')
		if !ok {
			return errdefs.Newf(errdefs.CodeInvalidSecret, "secret name %q: use letters, digits and _ (not starting with a digit)", name).With("name", name)
		}
	}
	return nil
}

// validateValue checks a value without ever echoing it.
func validateValue(name string, v []byte) error {
	switch {
	case len(v) < MinValueLen:
		return errdefs.Newf(errdefs.CodeInvalidSecret, "secret %q: value must be at least %d bytes", name, MinValueLen).With("name", name)
	case len(v) > MaxValueLen:
		return errdefs.Newf(errdefs.CodeInvalidSecret, "secret %q: value must be at most %d bytes", name, MaxValueLen).With("name", name)
	case !utf8.Valid(v):
		return errdefs.Newf(errdefs.CodeInvalidSecret, "secret %q: value must be UTF-8 text", name).With("name", name)
	}
	for _, c := range v {
		if c < 0x20 || c == 0x7f {
			// Values go into HTTP headers: CR, LF and NUL would split or break them.
			return errdefs.Newf(errdefs.CodeInvalidSecret, "secret %q: value must not contain control characters", name).With("name", name)
		}
	}
	return nil
}

func adFor(name string) []byte { return []byte("hutch-secret:" + name) }

// Set stores (or replaces) the secret name. The new value is used from the next request on.
// Errors: INVALID_SECRET.
func (s *Store) Set(ctx context.Context, name string, value []byte) (Info, error) {
	if err := ValidateName(name); err != nil {
		return Info{}, err
	}
	if err := validateValue(name, value); err != nil {
		return Info{}, err
	}
	row, err := s.db.PutSecret(ctx, name, s.box.Seal(value, adFor(name)))
	if err != nil {
		return Info{}, err
	}
	s.mu.Lock()
	s.cache[name] = append([]byte(nil), value...)
	s.gen++
	s.mu.Unlock()
	return Info{Name: row.Name, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, UsedBy: []string{}}, nil
}

// Value returns the secret's value. Errors: SECRET_NOT_FOUND; an internal error when the value
// cannot be opened (another master key).
func (s *Store) Value(ctx context.Context, name string) ([]byte, error) {
	s.mu.RLock()
	v, ok := s.cache[name]
	gen := s.gen
	s.mu.RUnlock()
	if ok {
		return v, nil
	}
	row, err := s.db.GetSecret(ctx, name)
	if err != nil {
		return nil, err
	}
	v, err = s.box.Open(row.Sealed, adFor(name))
	if err != nil {
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	s.mu.Lock()
	if s.gen == gen {
		s.cache[name] = v
	}
	s.mu.Unlock()
	return v, nil
}

// Exists reports whether the secret name exists.
func (s *Store) Exists(ctx context.Context, name string) bool {
	_, err := s.Value(ctx, name)
	return err == nil
}

// List returns every secret's Info (UsedBy empty), ordered by name.
func (s *Store) List(ctx context.Context) ([]Info, error) {
	rows, err := s.db.ListSecrets(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(rows))
	for _, r := range rows {
		out = append(out, Info{Name: r.Name, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, UsedBy: []string{}})
	}
	return out, nil
}

// Delete removes the secret name. Errors: SECRET_NOT_FOUND.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := s.db.DeleteSecret(ctx, name); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.cache, name)
	s.gen++
	s.mu.Unlock()
	return nil
}
