package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// marshalLayers encodes a layer list for the layers_json column (never "null").
func marshalLayers(layers []string) (string, error) {
	if layers == nil {
		layers = []string{}
	}
	b, err := json.Marshal(layers)
	if err != nil {
		return "", fmt.Errorf("store: layers: %w", err)
	}
	return string(b), nil
}

// SetDisk records what sandbox id's disk is built on: its image (ID and the name shown), its
// snapshot layers (newest first) and the snapshot they came from. Restoring a sandbox to a
// snapshot uses it. Unknown id → SANDBOX_NOT_FOUND.
func (s *Store) SetDisk(ctx context.Context, id, image, imageName string, layers []string, snapshot string) error {
	lj, err := marshalLayers(layers)
	if err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx,
		`UPDATE sandboxes SET image = ?, image_name = ?, layers_json = ?, snapshot = ?, updated_at = ? WHERE id = ?`,
		image, imageName, lj, snapshot, time.Now().UTC().UnixNano(), id)
	if err != nil {
		return fmt.Errorf("store: set disk %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errdefs.Newf(errdefs.CodeSandboxNotFound, "sandbox %q not found", id).With("id", id)
	}
	return nil
}

// UsedLayers returns every layer digest some sandbox's disk is built on (the local layer
// cache's garbage collector keeps these).
func (s *Store) UsedLayers(ctx context.Context) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT layers_json FROM sandboxes WHERE layers_json != '[]'`)
	if err != nil {
		return nil, fmt.Errorf("store: used layers: %w", err)
	}
	defer rows.Close()
	used := map[string]bool{}
	for rows.Next() {
		var lj string
		if err := rows.Scan(&lj); err != nil {
			return nil, fmt.Errorf("store: used layers: %w", err)
		}
		var layers []string
		if err := json.Unmarshal([]byte(lj), &layers); err != nil {
			return nil, fmt.Errorf("store: used layers: %w", err)
		}
		for _, l := range layers {
			used[l] = true
		}
	}
	return used, rows.Err()
}
