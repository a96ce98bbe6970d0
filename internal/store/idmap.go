package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/idmap"
)

// IDMap returns the sandbox's ID range: the zero Map (IDs not shifted) without a user
// namespace.
func (sb Sandbox) IDMap() idmap.Map {
	if sb.IDBase == 0 {
		return idmap.Map{}
	}
	return idmap.Map{Base: sb.IDBase, Size: IDRangeSize}
}

// User namespace ID ranges. A sandbox with a user namespace owns the host UIDs and GIDs
// [IDBase, IDBase+IDRangeSize): in-sandbox ID n (0 = root) is host ID IDBase+n. Bases start at
// FirstIDBase (2^20 = 1048576), far above host users (below 65536, systemd's dynamic users
// included), and step by IDRangeSize, so ranges never overlap; the store hands out the lowest
// free one. The ranges lie inside systemd's pool for containers (524288–1879048191): a host
// that also runs systemd-nspawn -U containers must not let both allocate.
const (
	IDRangeSize uint32 = 1 << 16
	FirstIDBase uint32 = 1 << 20
	// MaxIDBase is the highest base handed out: the last range ends below 2^31 (some tools
	// treat IDs as signed 32-bit numbers, and 2^32-1 is the invalid ID). That is 32752 ranges.
	MaxIDBase uint32 = 1<<31 - IDRangeSize
)

// freeIDBase returns the lowest base of FirstIDBase + k*IDRangeSize no sandbox row holds, or
// errdefs.CodeUnavailable when every range up to MaxIDBase is taken.
func freeIDBase(ctx context.Context, tx *sql.Tx) (uint32, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id_base FROM sandboxes WHERE id_base != 0 ORDER BY id_base`)
	if err != nil {
		return 0, fmt.Errorf("store: id ranges: %w", err)
	}
	defer rows.Close()
	want := FirstIDBase
	for rows.Next() {
		var b uint32
		if err := rows.Scan(&b); err != nil {
			return 0, fmt.Errorf("store: id ranges: %w", err)
		}
		if b > want {
			break
		}
		if b == want {
			want += IDRangeSize
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("store: id ranges: %w", err)
	}
	if want > MaxIDBase {
		return 0, errdefs.New(errdefs.CodeUnavailable, "no free user namespace ID range: too many sandboxes on this host")
	}
	return want, nil
}
