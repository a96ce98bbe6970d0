package server

import (
	"context"
	"net/http"
	"time"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/sandboxid"
	"github.com/hutchdev/hutch/internal/snapshot"
)

// Snapshots is what the API needs of the snapshot service; *snapshot.Service implements it.
type Snapshots interface {
	Create(ctx context.Context, sandboxID string) (snapshot.Snapshot, error)
	Get(ctx context.Context, id string) (snapshot.Snapshot, error)
	List(ctx context.Context, sandboxID string) ([]snapshot.Snapshot, error)
	CreateSandbox(ctx context.Context, opts sandbox.CreateOptions, snapID string) (sandbox.Info, bool, error)
	Fork(ctx context.Context, id string, opts snapshot.ForkOptions) (snapshot.ForkResult, error)
	Restore(ctx context.Context, id, snapID string) (sandbox.Info, error)
	Delete(ctx context.Context, id string) error
}

// createSnapshot: POST /v1/sandboxes/{id}/snapshots → 201 {success, id, sandboxId, sizeBytes,
// createdAt, layers, parentLayers, image, config, format, timestamp}.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	if !s.snapshotsEnabled(w, r) {
		return
	}
	var req struct{}
	if err := readJSON(w, r, &req); err != nil {
		writeError(w, r, err, "snapshot.create")
		return
	}
	snap, err := s.snapshots.Create(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err, "snapshot.create")
		return
	}
	writeJSON(w, http.StatusCreated, v1.SnapshotReply{Success: true, Snapshot: toSnapshot(snap), Timestamp: time.Now().UTC()})
}

// getSnapshot: GET /v1/snapshots/{sid} → the snapshot's record.
func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	if !s.snapshotsEnabled(w, r) {
		return
	}
	snap, err := s.snapshots.Get(r.Context(), r.PathValue("sid"))
	if err != nil {
		writeError(w, r, err, "snapshot.get")
		return
	}
	writeJSON(w, http.StatusOK, v1.SnapshotReply{Success: true, Snapshot: toSnapshot(snap), Timestamp: time.Now().UTC()})
}

// deleteSnapshot: DELETE /v1/snapshots/{sid} → {success, id, timestamp}. The snapshot's
// meta goes, then every layer blob nothing references any more (no snapshot, no sandbox).
// Unknown → 404 SNAPSHOT_NOT_FOUND.
func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	if !s.snapshotsEnabled(w, r) {
		return
	}
	id := r.PathValue("sid")
	if err := s.snapshots.Delete(r.Context(), id); err != nil {
		writeError(w, r, err, "snapshot.delete")
		return
	}
	writeJSON(w, http.StatusOK, v1.Deleted{Reply: v1.Stamped(), ID: id})
}

// listSnapshots: GET /v1/snapshots[?sandbox=ID] → {success, snapshots: [...], timestamp}.
func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	if !s.snapshotsEnabled(w, r) {
		return
	}
	list, err := s.snapshots.List(r.Context(), r.URL.Query().Get("sandbox"))
	if err != nil {
		writeError(w, r, err, "snapshot.list")
		return
	}
	writeJSON(w, http.StatusOK, v1.SnapshotList{Reply: v1.Stamped(), Snapshots: toSnapshots(list)})
}

// forkSandbox: POST /v1/sandboxes/{id}/fork {count, prefix?, ids?} → 201 {success, snapshot,
// sandboxes: [info + startMs], snapshotMs, forkMs, totalMs, timestamp}.
func (s *Server) forkSandbox(w http.ResponseWriter, r *http.Request) {
	if !s.snapshotsEnabled(w, r) {
		return
	}
	var req v1.ForkRequest
	if err := readJSON(w, r, &req); err != nil {
		writeError(w, r, err, "sandbox.fork")
		return
	}
	res, err := s.snapshots.Fork(r.Context(), r.PathValue("id"), snapshot.ForkOptions{Count: req.Count, Prefix: req.Prefix, IDs: req.IDs})
	if err != nil {
		writeError(w, r, err, "sandbox.fork")
		return
	}
	writeJSON(w, http.StatusCreated, v1.ForkReply{Success: true, ForkResult: toForkResult(res), Timestamp: time.Now().UTC()})
}

// restoreSnapshot: POST /v1/sandboxes/{id}/restore-snapshot {snapshot} → the sandbox's info,
// running on the snapshot's disk.
func (s *Server) restoreSnapshot(w http.ResponseWriter, r *http.Request) {
	if !s.snapshotsEnabled(w, r) {
		return
	}
	var req v1.RestoreSnapshotRequest
	if err := readJSON(w, r, &req); err != nil {
		writeError(w, r, err, "snapshot.restore")
		return
	}
	if req.Snapshot == "" {
		writeError(w, r, errdefs.New(errdefs.CodeInvalidArgument, "snapshot is required"), "snapshot.restore")
		return
	}
	info, err := s.snapshots.Restore(r.Context(), r.PathValue("id"), req.Snapshot)
	if err != nil {
		writeError(w, r, err, "snapshot.restore")
		return
	}
	writeJSON(w, http.StatusOK, toSandbox(info))
}

// createFromSnapshot is the get-or-create of POST /v1/sandboxes with a snapshot.
func (s *Server) createFromSnapshot(w http.ResponseWriter, r *http.Request, req v1.CreateSandboxRequest, opts sandbox.CreateOptions, egressDone func(context.Context, bool) error) {
	if !s.snapshotsEnabled(w, r) {
		_ = egressDone(r.Context(), false) // false only unstages, which cannot fail
		return
	}
	if req.Image != "" {
		_ = egressDone(r.Context(), false) // false only unstages, which cannot fail
		writeError(w, r, errdefs.New(errdefs.CodeInvalidArgument, "image and snapshot exclude each other: a snapshot brings its image"), "sandbox.create")
		return
	}
	opts.Image = "" // a snapshot brings its image (checked above)
	var err error
	opts.ID, err = sandboxid.Parse(req.ID)
	var info sandbox.Info
	created := false
	if err == nil {
		info, created, err = s.snapshots.CreateSandbox(r.Context(), opts, req.Snapshot)
	}
	if err == nil {
		err = egressDone(r.Context(), true)
	} else {
		_ = egressDone(r.Context(), false) // false only unstages, which cannot fail
	}
	if err != nil {
		writeError(w, r, err, "sandbox.create")
		return
	}
	noteAuditID(r, info.ID)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, toSandbox(info))
}

// snapshotsEnabled answers NOT_IMPLEMENTED when the server has no snapshot service.
func (s *Server) snapshotsEnabled(w http.ResponseWriter, r *http.Request) bool {
	if s.snapshots == nil {
		writeError(w, r, errdefs.New(errdefs.CodeNotImplemented, "snapshots are not available on this server"), "")
		return false
	}
	return true
}
