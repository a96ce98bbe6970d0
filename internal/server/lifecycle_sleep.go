package server

import (
	"bytes"
	"encoding/json"
	"net/http"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/errdefs"
)

// readOptions decodes a JSON body like readJSON, but keeps a classified error raised by a
// field's decoder (a sleepAfter of a wrong type is VALIDATION_FAILED, not INVALID_JSON). A bad
// sleepAfter value (*sa after decoding) wins over any other decoding error, as when it was
// checked while decoding.
func readOptions(w http.ResponseWriter, r *http.Request, v any, sa **v1.SleepAfter) ([]byte, error) {
	body, err := readBody(w, r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		if errdefs.CodeOf(err) == errdefs.CodeInvalidArgument {
			return nil, err
		}
		if _, _, saErr := sleepAfter(*sa); saErr != nil {
			return nil, saErr
		}
		return nil, errdefs.Wrap(errdefs.CodeInvalidJSON, err, "request body is not valid JSON")
	}
	return body, nil
}

// updateSandbox is PATCH /v1/sandboxes/{id}: change sleepAfter, keepAlive and/or
// snapshotOnSleep. It does not
// wake a sleeping sandbox; on a running one it re-arms the idle timer.
func (s *Server) updateSandbox(w http.ResponseWriter, r *http.Request) {
	var req v1.UpdateSandboxRequest
	if _, err := readOptions(w, r, &req, &req.SleepAfter); err != nil {
		writeError(w, r, err, "sandbox.update")
		return
	}
	opts, err := updateOptions(req)
	if err != nil {
		writeError(w, r, err, "sandbox.update")
		return
	}
	id, err := pathID(r)
	if err != nil {
		writeError(w, r, err, "sandbox.update")
		return
	}
	info, err := s.mgr.Update(r.Context(), id, opts)
	if err != nil {
		writeError(w, r, err, "sandbox.update")
		return
	}
	writeJSON(w, http.StatusOK, toSandbox(info))
}

// sleepSandbox is POST /v1/sandboxes/{id}/sleep: sleep now (idempotent).
func (s *Server) sleepSandbox(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeError(w, r, err, "sandbox.sleep")
		return
	}
	info, err := s.mgr.Sleep(r.Context(), id)
	if err != nil {
		writeError(w, r, err, "sandbox.sleep")
		return
	}
	writeJSON(w, http.StatusOK, toSandbox(info))
}

// wakeSandbox is POST /v1/sandboxes/{id}/wake: the same as start.
func (s *Server) wakeSandbox(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeError(w, r, err, "sandbox.wake")
		return
	}
	info, err := s.mgr.Start(r.Context(), id)
	if err != nil {
		writeError(w, r, err, "sandbox.wake")
		return
	}
	writeJSON(w, http.StatusOK, toSandbox(info))
}
