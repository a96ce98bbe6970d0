package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	v1 "github.com/hutchdev/hutch/api/v1"
)

// SnapshotLayer is one layer of a snapshot.
type SnapshotLayer = v1.SnapshotLayer

// SnapshotInfo is a snapshot: a sandbox's whole disk and configuration, content-addressed.
type SnapshotInfo = v1.Snapshot

// Snapshot captures the sandbox's whole disk and configuration (POST
// /v1/sandboxes/{id}/snapshots) and returns the snapshot. A running sandbox is frozen while its
// disk is read (its processes make no progress; requests to it wait), then thawed; a sleeping
// one is not woken. Create sandboxes from it with SandboxOptions.Snapshot, or reset one to it
// with RestoreSnapshot. Errors: SANDBOX_NOT_FOUND (ErrNotFound), SNAPSHOT_TOO_DEEP,
// SNAPSHOT_FAILED, NOT_IMPLEMENTED (no snapshots on the server).
func (s *Sandbox) Snapshot(ctx context.Context) (*SnapshotInfo, error) {
	if err := checkID(s.sandboxID); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	var snap SnapshotInfo
	err := s.c.call(ctx, request{method: http.MethodPost, path: sandboxPath(s.sandboxID, "/snapshots"), json: struct{}{}}, &snap)
	if err != nil {
		return nil, fmt.Errorf("snapshot %q: %w", s.sandboxID, err)
	}
	return &snap, nil
}

// ForkOptions name a fork's sandboxes: IDs (one per fork) when given, else "<Prefix>-<i>" for
// i = 1…n, Prefix defaulting to "<sandbox>-fork".
type ForkOptions struct {
	Prefix string
	IDs    []string
}

// ForkedSandbox is one sandbox made by Fork.
type ForkedSandbox = v1.ForkedSandbox

// ForkResult is Fork's result; times are in milliseconds.
type ForkResult = v1.ForkResult

// Fork snapshots the sandbox once and creates n sandboxes (1–64) from the snapshot in parallel
// (POST /v1/sandboxes/{id}/fork); all run when Fork returns. Each fork has the sandbox's disk
// and configuration, shares the snapshot's layers read-only and writes to a disk of its own:
// no fork sees another's writes. opts may be nil. If one fork fails, none is left. Errors:
// VALIDATION_FAILED (n, IDs), SANDBOX_ALREADY_EXISTS (a fork ID is taken), those of Snapshot.
func (s *Sandbox) Fork(ctx context.Context, n int, opts *ForkOptions) (*ForkResult, error) {
	if err := checkID(s.sandboxID); err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	req := v1.ForkRequest{Count: n}
	if opts != nil {
		req.Prefix, req.IDs = opts.Prefix, opts.IDs
	}
	var res ForkResult
	if err := s.c.call(ctx, request{method: http.MethodPost, path: sandboxPath(s.sandboxID, "/fork"), json: req}, &res); err != nil {
		return nil, fmt.Errorf("fork %q: %w", s.sandboxID, err)
	}
	return &res, nil
}

// RestoreSnapshot resets the sandbox's disk to snapshot id (POST
// /v1/sandboxes/{id}/restore-snapshot): the sandbox is stopped if it runs, everything written
// since is discarded, and it starts again on the snapshot's disk and image; its own settings
// and exposed ports stay. Returns its record. Errors: SNAPSHOT_NOT_FOUND (ErrNotFound),
// SANDBOX_NOT_FOUND, VALIDATION_FAILED (malformed id).
func (s *Sandbox) RestoreSnapshot(ctx context.Context, id string) (*SandboxInfo, error) {
	if err := checkID(s.sandboxID); err != nil {
		return nil, fmt.Errorf("restore snapshot: %w", err)
	}
	var info SandboxInfo
	err := s.c.call(ctx, request{method: http.MethodPost, path: sandboxPath(s.sandboxID, "/restore-snapshot"),
		json: v1.RestoreSnapshotRequest{Snapshot: id}}, &info)
	if err != nil {
		return nil, fmt.Errorf("restore %q to snapshot %s: %w", s.sandboxID, id, err)
	}
	return &info, nil
}

// GetSnapshot returns snapshot id's record (GET /v1/snapshots/{id}). Unknown →
// SNAPSHOT_NOT_FOUND (ErrNotFound).
func (c *Client) GetSnapshot(ctx context.Context, id string) (*SnapshotInfo, error) {
	var snap SnapshotInfo
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/snapshots/" + url.PathEscape(id)}, &snap); err != nil {
		return nil, fmt.Errorf("get snapshot %s: %w", id, err)
	}
	return &snap, nil
}

// DeleteSnapshot deletes snapshot id (DELETE /v1/snapshots/{id}); then the server deletes
// every layer blob that no remaining snapshot lists and no sandbox's disk is built on.
// Sandboxes created from the snapshot keep working. Errors: SNAPSHOT_NOT_FOUND (ErrNotFound),
// VALIDATION_FAILED (ErrInvalidArgument) for an ID that is not "sha256-<hex>".
func (c *Client) DeleteSnapshot(ctx context.Context, id string) error {
	if err := c.call(ctx, request{method: http.MethodDelete, path: "/v1/snapshots/" + url.PathEscape(id)}, nil); err != nil {
		return fmt.Errorf("delete snapshot %s: %w", id, err)
	}
	return nil
}

// ListSnapshots lists the snapshots in the server's blob store, oldest first; sandboxID
// non-empty keeps those taken of that sandbox (GET /v1/snapshots?sandbox=).
func (c *Client) ListSnapshots(ctx context.Context, sandboxID string) ([]SnapshotInfo, error) {
	var q url.Values
	if sandboxID != "" {
		q = url.Values{"sandbox": {sandboxID}}
	}
	var out v1.SnapshotList
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/snapshots", query: q}, &out); err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	return out.Snapshots, nil
}
