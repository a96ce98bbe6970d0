package server

import (
	"net/http"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/sandboxid"
)

// pathID parses the {id} path value, the one place a sandbox ID from a path becomes a
// sandboxid.ID. Errors: INVALID_SANDBOX_ID, RESERVED_SANDBOX_ID.
func pathID(r *http.Request) (sandboxid.ID, error) { return sandboxid.Parse(r.PathValue("id")) }

// createSandbox is get-or-create: 201 when created, 200 when it existed; running either way.
func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req v1.CreateSandboxRequest
	body, err := readOptions(w, r, &req, &req.SleepAfter)
	if err != nil {
		writeError(w, r, err, "sandbox.create")
		return
	}
	spec, err := createEgress(body)
	if err != nil {
		writeError(w, r, err, "sandbox.create")
		return
	}
	opts, err := createOptions(req)
	if err != nil {
		writeError(w, r, err, "sandbox.create")
		return
	}
	egressDone, err := s.stageEgress(r.Context(), req.ID, spec)
	if err != nil {
		writeError(w, r, err, "sandbox.create")
		return
	}
	if req.Snapshot != "" {
		s.createFromSnapshot(w, r, req, opts, egressDone)
		return
	}
	opts.ID, err = sandboxid.Parse(req.ID)
	var info sandbox.Info
	created := false
	if err == nil {
		info, created, err = s.mgr.GetOrCreate(r.Context(), opts, nil)
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

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	list, err := s.mgr.List(r.Context())
	if err != nil {
		writeError(w, r, err, "sandbox.list")
		return
	}
	writeJSON(w, http.StatusOK, v1.SandboxList{Sandboxes: toSandboxes(list)})
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeError(w, r, err, "sandbox.get")
		return
	}
	info, err := s.mgr.Get(r.Context(), id)
	if err != nil {
		writeError(w, r, err, "sandbox.get")
		return
	}
	writeJSON(w, http.StatusOK, toSandbox(info))
}

func (s *Server) destroySandbox(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err == nil {
		err = s.mgr.Destroy(r.Context(), id)
	}
	if err != nil {
		writeError(w, r, err, "sandbox.destroy")
		return
	}
	if s.egress != nil {
		s.egress.Forget(r.Context(), id.String())
	}
	writeJSON(w, http.StatusOK, v1.DestroySandboxResult{Success: true, ID: id.String()})
}

func (s *Server) startSandbox(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeError(w, r, err, "sandbox.start")
		return
	}
	info, err := s.mgr.Start(r.Context(), id)
	if err != nil {
		writeError(w, r, err, "sandbox.start")
		return
	}
	writeJSON(w, http.StatusOK, toSandbox(info))
}

func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeError(w, r, err, "sandbox.stop")
		return
	}
	info, err := s.mgr.Stop(r.Context(), id)
	if err != nil {
		writeError(w, r, err, "sandbox.stop")
		return
	}
	writeJSON(w, http.StatusOK, toSandbox(info))
}
