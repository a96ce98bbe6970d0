package v1

import "time"

// Snapshot origins (Snapshot.Origin).
const (
	// OriginRequest: asked for; deleted only by a DELETE.
	OriginRequest = "request"
	// OriginSleep: taken at a sleep of a sandbox with snapshotOnSleep; only the newest
	// (hutchd's sleepSnapshotsKeep, default 1) are kept, deleted with the sandbox, evicted
	// first past its quota.
	OriginSleep = "sleep"
)

// SnapshotFormat is Snapshot.Format: layers are deterministic tars, zstd-compressed.
const SnapshotFormat = "tar+zstd"

// Snapshot is a sandbox's whole disk (every change since its image, deletions included) and
// its configuration, content-addressed in hutchd's blob store: ID is "sha256-<hex>" of its
// content, so an unchanged disk snapshots to the same ID. Unknown → 404 SNAPSHOT_NOT_FOUND.
type Snapshot struct {
	ID string `json:"id"`
	// SandboxID is the sandbox it was taken of.
	SandboxID string    `json:"sandboxId"`
	CreatedAt time.Time `json:"createdAt"`
	// SizeBytes is the compressed size of all its layers.
	SizeBytes int64 `json:"sizeBytes"`
	// Layers, newest first: the captured disk, then the layers it was built on;
	// ParentLayers are the digests of the latter.
	Layers       []SnapshotLayer `json:"layers"`
	ParentLayers []string        `json:"parentLayers"`
	Image        SnapshotImage   `json:"image"`
	Config       SnapshotConfig  `json:"config"`
	// Format is SnapshotFormat.
	Format string `json:"format"`
	// Origin is OriginRequest or OriginSleep; absent in snapshots made before origins were
	// recorded (they count as requested).
	Origin string `json:"origin,omitempty"`
}

// SnapshotLayer is one layer of a snapshot.
type SnapshotLayer struct {
	// Digest is "sha256-<hex>" of the uncompressed tar.
	Digest string `json:"digest"`
	// SizeBytes is the uncompressed tar's size (-1 when unknown); CompressedBytes the blob's.
	SizeBytes       int64 `json:"sizeBytes"`
	CompressedBytes int64 `json:"compressedBytes"`
}

// SnapshotImage is the base image a snapshot's layers lie on.
type SnapshotImage struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// SnapshotConfig is the sandbox configuration a snapshot carries: the defaults of a sandbox
// created from it.
type SnapshotConfig struct {
	InstanceType string            `json:"instanceType"`
	EnvVars      map[string]string `json:"envVars"`
	SleepAfter   string            `json:"sleepAfter"`
	KeepAlive    bool              `json:"keepAlive"`
}

// SnapshotReply is the reply of createSnapshot (POST /v1/sandboxes/{id}/snapshots, empty
// body, 201) and getSnapshot: {success, …Snapshot, timestamp}. A running sandbox is frozen
// while its disk is read; a sleeping one stays asleep. Errors: 409 SNAPSHOT_TOO_DEEP (past 24
// layers), SNAPSHOT_FROZEN_TOO_LONG; 507 SNAPSHOT_QUOTA_EXCEEDED; 500 SNAPSHOT_FAILED.
type SnapshotReply struct {
	Success bool `json:"success"`
	Snapshot
	Timestamp time.Time `json:"timestamp"`
}

// SnapshotList is the reply of GET /v1/snapshots[?sandbox=ID], oldest first.
type SnapshotList struct {
	Reply
	Snapshots []Snapshot `json:"snapshots"`
}

// ForkRequest is the body of POST /v1/sandboxes/{id}/fork: one snapshot, then Count (1–64)
// sandboxes started from it in parallel, named IDs or <Prefix>-1… (Prefix default
// <id>-fork). Errors: 409 SANDBOX_ALREADY_EXISTS; if a fork fails, none is left.
type ForkRequest struct {
	Count  int      `json:"count"`
	Prefix string   `json:"prefix,omitempty"`
	IDs    []string `json:"ids,omitempty"`
}

// ForkedSandbox is a sandbox a fork created, with the milliseconds its start took.
type ForkedSandbox struct {
	Sandbox
	StartMs float64 `json:"startMs"`
}

// ForkResult is the outcome of a fork: the snapshot, the forks, and the milliseconds taken by
// the snapshot, by the forks (in parallel) and in all.
type ForkResult struct {
	Snapshot   Snapshot        `json:"snapshot"`
	Sandboxes  []ForkedSandbox `json:"sandboxes"`
	SnapshotMs float64         `json:"snapshotMs"`
	ForkMs     float64         `json:"forkMs"`
	TotalMs    float64         `json:"totalMs"`
}

// ForkReply is the reply of fork (201): {success, …ForkResult, timestamp}.
type ForkReply struct {
	Success bool `json:"success"`
	ForkResult
	Timestamp time.Time `json:"timestamp"`
}

// RestoreSnapshotRequest is the body of POST /v1/sandboxes/{id}/restore-snapshot: the sandbox
// is stopped, its disk's changes discarded, rebuilt on the snapshot's layers and image, and
// started; it replies the Sandbox. Its own env vars, instance type, sleep settings and ports
// stay.
type RestoreSnapshotRequest struct {
	Snapshot string `json:"snapshot"`
}
