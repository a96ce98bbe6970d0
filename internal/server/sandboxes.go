package server

import (
	"net/http"

	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/sandbox"
)

type createRequest struct {
	ID           string            `json:"id"`
	Image        string            `json:"image"`
	InstanceType string            `json:"instanceType"`
	EnvVars      map[string]string `json:"envVars"`
	// SleepAfter and KeepAlive: see lifecycle_sleep.go.
	SleepAfter sleepAfterValue `json:"sleepAfter"`
	KeepAlive  bool            `json:"keepAlive"`
	// SnapshotOnSleep: every sleep snapshots the sandbox (see sandbox.SleepSnapshotter).
	SnapshotOnSleep bool `json:"snapshotOnSleep"`
	// Snapshot ("sha256-…") creates the sandbox from a snapshot (snapshots.go).
	Snapshot string `json:"snapshot"`
	// Egress is the sandbox's egress policy, applied before its first process runs
	// (handle_egress.go); ignored when the sandbox exists already.
	Egress *policy.Spec `json:"egress"`
	// Runtime is the isolation runtime, "runc" or "gvisor"; empty: hutchd's default.
	Runtime string `json:"runtime"`
}

// createSandbox is get-or-create: 201 when created, 200 when it existed; running either way.
func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if err := readOptions(w, r, &req); err != nil {
		writeError(w, r, err, "sandbox.create")
		return
	}
	egressDone, err := s.stageEgress(r.Context(), req.ID, req.Egress)
	if err != nil {
		writeError(w, r, err, "sandbox.create")
		return
	}
	if req.Snapshot != "" {
		s.createFromSnapshot(w, r, req, egressDone)
		return
	}
	info, created, err := s.mgr.GetOrCreate(r.Context(), sandbox.CreateOptions{
		ID: req.ID, Image: req.Image, InstanceType: req.InstanceType, EnvVars: req.EnvVars,
		SleepAfter: req.SleepAfter.d, KeepAlive: req.KeepAlive, SnapshotOnSleep: req.SnapshotOnSleep,
		Runtime: req.Runtime,
	}, nil)
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
	writeJSON(w, status, info)
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	list, err := s.mgr.List(r.Context())
	if err != nil {
		writeError(w, r, err, "sandbox.list")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": list})
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	info, err := s.mgr.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err, "sandbox.get")
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) destroySandbox(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.mgr.Destroy(r.Context(), id); err != nil {
		writeError(w, r, err, "sandbox.destroy")
		return
	}
	if s.egress != nil {
		s.egress.Forget(r.Context(), id)
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "id": id})
}

func (s *Server) startSandbox(w http.ResponseWriter, r *http.Request) {
	info, err := s.mgr.Start(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err, "sandbox.start")
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request) {
	info, err := s.mgr.Stop(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err, "sandbox.stop")
		return
	}
	writeJSON(w, http.StatusOK, info)
}
