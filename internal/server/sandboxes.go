package server

import (
	"net/http"

	v1 "github.com/hutchdev/hutch/api/v1"
)

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
	info, created, err := s.mgr.GetOrCreate(r.Context(), opts, nil)
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
	info, err := s.mgr.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err, "sandbox.get")
		return
	}
	writeJSON(w, http.StatusOK, toSandbox(info))
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
	writeJSON(w, http.StatusOK, v1.DestroySandboxResult{Success: true, ID: id})
}

func (s *Server) startSandbox(w http.ResponseWriter, r *http.Request) {
	info, err := s.mgr.Start(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err, "sandbox.start")
		return
	}
	writeJSON(w, http.StatusOK, toSandbox(info))
}

func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request) {
	info, err := s.mgr.Stop(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err, "sandbox.stop")
		return
	}
	writeJSON(w, http.StatusOK, toSandbox(info))
}
