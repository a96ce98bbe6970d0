package mitm

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/secret"
	"github.com/hutchdev/hutch/internal/store"
	"golang.org/x/sync/singleflight"
)

// DefaultLeafCache is the leaf cache's default capacity (leaves across all sandboxes).
const DefaultLeafCache = 10000

// Authority gives each sandbox its CA and mints leaves. It is safe for concurrent use.
type Authority struct {
	db  *store.Store
	box *secret.Box
	log *slog.Logger
	now func() time.Time

	mu  sync.Mutex
	cas map[string]*CA // loaded CAs by sandbox ID

	sf     singleflight.Group
	leafMu sync.Mutex
	leaves *lru
}

// NewAuthority returns an Authority storing CAs in db with keys sealed by box. leafCache
// bounds the leaf cache (0: DefaultLeafCache).
func NewAuthority(db *store.Store, box *secret.Box, leafCache int, log *slog.Logger) *Authority {
	if leafCache <= 0 {
		leafCache = DefaultLeafCache
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Authority{db: db, box: box, log: log, now: time.Now, cas: map[string]*CA{}, leaves: newLRU(leafCache)}
}

func keyAD(sandboxID string) []byte { return []byte("hutch-egress-ca:" + sandboxID) }

// Ensure returns sandboxID's CA, making and storing one if it has none. When it has none and
// inheritFrom names a sandbox that has one, that CA is copied instead (forks and sandboxes
// started from a snapshot keep trusting what their disk and memory already trust). Errors:
// SANDBOX_NOT_FOUND.
func (a *Authority) Ensure(ctx context.Context, sandboxID, inheritFrom string) (*CA, error) {
	return a.EnsureFrom(ctx, sandboxID, inheritFrom, "")
}

// EnsureFrom is Ensure for a sandbox started from snapshot snapshotID (may be ""): when
// inheritFrom has no CA any more (destroyed since), the CA recorded with the snapshot
// (RememberSnapshot) is copied, so the sandbox trusts what its disk already trusts.
func (a *Authority) EnsureFrom(ctx context.Context, sandboxID, inheritFrom, snapshotID string) (*CA, error) {
	if ca, err := a.Get(ctx, sandboxID); err == nil {
		return ca, nil
	} else if !errors.Is(err, errdefs.ErrNotFound) || errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		return nil, err
	}
	var ca *CA
	if inheritFrom != "" && inheritFrom != sandboxID {
		parent, err := a.Get(ctx, inheritFrom)
		switch {
		case err == nil:
			ca = parent
		case errors.Is(err, errdefs.ErrNotFound):
		default:
			return nil, err
		}
	}
	if ca == nil && snapshotID != "" {
		row, err := a.db.GetSnapshotCA(ctx, snapshotID)
		switch {
		case err == nil:
			keyDER, err := a.box.Open(row.KeySealed, keyAD(row.SandboxID))
			if err != nil {
				return nil, fmt.Errorf("mitm: ca key of snapshot %s: %w", snapshotID, err)
			}
			if ca, err = ParseCA([]byte(row.CertPEM), keyDER); err != nil {
				return nil, err
			}
		case errors.Is(err, errdefs.ErrNotFound):
		default:
			return nil, err
		}
	}
	if ca == nil {
		var err error
		if ca, err = NewCA(sandboxID, a.now()); err != nil {
			return nil, err
		}
	}
	keyDER, err := ca.KeyDER()
	if err != nil {
		return nil, err
	}
	row, err := a.db.InsertCA(ctx, store.SandboxCA{SandboxID: sandboxID, CertPEM: string(ca.CertPEM), KeySealed: a.box.Seal(keyDER, keyAD(sandboxID))})
	if err != nil {
		return nil, err
	}
	// Another caller may have won the insert: load what is stored.
	a.mu.Lock()
	delete(a.cas, sandboxID)
	a.mu.Unlock()
	stored, err := a.Get(ctx, row.SandboxID)
	if err != nil {
		return nil, err
	}
	a.log.InfoContext(ctx, "egress CA ready", "sandbox_id", sandboxID, "ca", stored.ID, "inherited_from", inheritFrom)
	return stored, nil
}

// Get returns sandboxID's stored CA. None → an errdefs NOT_FOUND error (class ErrNotFound).
func (a *Authority) Get(ctx context.Context, sandboxID string) (*CA, error) {
	a.mu.Lock()
	ca := a.cas[sandboxID]
	a.mu.Unlock()
	if ca != nil {
		return ca, nil
	}
	row, err := a.db.GetCA(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	keyDER, err := a.box.Open(row.KeySealed, keyAD(sandboxID))
	if err != nil {
		return nil, fmt.Errorf("mitm: ca key of %s: %w", sandboxID, err)
	}
	ca, err = ParseCA([]byte(row.CertPEM), keyDER)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.cas[sandboxID] = ca
	a.mu.Unlock()
	return ca, nil
}

// CertPEM returns sandboxID's CA certificate (PEM), never its key. None → NOT_FOUND.
func (a *Authority) CertPEM(ctx context.Context, sandboxID string) ([]byte, error) {
	ca, err := a.Get(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	return ca.CertPEM, nil
}

// Leaf returns a leaf for host signed by sandboxID's CA, from the cache when one with at
// least LeafRenewBefore left is there. Concurrent calls for one (CA, host) mint once.
func (a *Authority) Leaf(ctx context.Context, sandboxID, host string) (*tls.Certificate, error) {
	ca, err := a.Get(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	key := ca.ID + "\x00" + host
	now := a.now()
	a.leafMu.Lock()
	c, ok := a.leaves.get(key)
	a.leafMu.Unlock()
	if ok && c.Leaf.NotAfter.Sub(now) > LeafRenewBefore {
		return c, nil
	}
	v, err, _ := a.sf.Do(key, func() (any, error) {
		c, err := ca.MintLeaf(host, now)
		if err != nil {
			return nil, err
		}
		a.leafMu.Lock()
		a.leaves.add(key, c)
		a.leafMu.Unlock()
		return c, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*tls.Certificate), nil
}

// Forget drops sandboxID's CA from memory (the store keeps it; the row goes with the sandbox).
// Its leaves age out of the LRU.
func (a *Authority) Forget(sandboxID string) {
	a.mu.Lock()
	delete(a.cas, sandboxID)
	a.mu.Unlock()
}

// lru is a bounded least-recently-used map; the caller locks.
type lru struct {
	max   int
	order *list.List // front = most recent; values are *lruEntry
	items map[string]*list.Element
}

type lruEntry struct {
	key  string
	cert *tls.Certificate
}

func newLRU(max int) *lru {
	return &lru{max: max, order: list.New(), items: map[string]*list.Element{}}
}

func (l *lru) get(key string) (*tls.Certificate, bool) {
	e, ok := l.items[key]
	if !ok {
		return nil, false
	}
	l.order.MoveToFront(e)
	return e.Value.(*lruEntry).cert, true
}

func (l *lru) add(key string, c *tls.Certificate) {
	if e, ok := l.items[key]; ok {
		e.Value.(*lruEntry).cert = c
		l.order.MoveToFront(e)
		return
	}
	l.items[key] = l.order.PushFront(&lruEntry{key: key, cert: c})
	for l.order.Len() > l.max {
		old := l.order.Back()
		l.order.Remove(old)
		delete(l.items, old.Value.(*lruEntry).key)
	}
}

func (l *lru) len() int { return l.order.Len() }

// RememberSnapshot records sandboxID's CA (if it has one) as the CA of snapshot snapshotID, so
// sandboxes started from the snapshot get it even after sandboxID is destroyed (EnsureFrom).
func (a *Authority) RememberSnapshot(ctx context.Context, snapshotID, sandboxID string) error {
	row, err := a.db.GetCA(ctx, sandboxID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return a.db.PutSnapshotCA(ctx, snapshotID, row)
}
