package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/sandbox"
)

// sleepAfterValue is a sleepAfter in a request body: a Go duration string ("10m", "30s") or a
// JSON number of seconds. Bad values fail the decoding with VALIDATION_FAILED.
type sleepAfterValue struct {
	set bool
	d   time.Duration
}

func (v *sleepAfterValue) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*v = sleepAfterValue{}
		return nil
	}
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	} else {
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return errdefs.New(errdefs.CodeInvalidArgument, `sleepAfter: want a duration string such as "10m" or a number of seconds`)
		}
		// A JSON number, maybe beyond a float64 (1e400): ParseSleepAfter refuses it by its value.
		s = n.String()
	}
	d, err := sandbox.ParseSleepAfter(s)
	if err != nil {
		return err
	}
	*v = sleepAfterValue{set: true, d: d}
	return nil
}

// readOptions decodes a JSON body like readJSON, but keeps a classified error raised by a
// field's decoder (a bad sleepAfter is VALIDATION_FAILED, not INVALID_JSON).
func readOptions(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		if errdefs.CodeOf(err) == errdefs.CodeInvalidArgument {
			return err
		}
		return errdefs.Wrap(errdefs.CodeInvalidJSON, err, "request body is not valid JSON")
	}
	return nil
}

type updateRequest struct {
	SleepAfter sleepAfterValue `json:"sleepAfter"`
	KeepAlive  *bool           `json:"keepAlive"`
	// SnapshotOnSleep: every sleep snapshots the sandbox.
	SnapshotOnSleep *bool `json:"snapshotOnSleep"`
}

// updateSandbox is PATCH /v1/sandboxes/{id}: change sleepAfter, keepAlive and/or
// snapshotOnSleep. It does not
// wake a sleeping sandbox; on a running one it re-arms the idle timer.
func (s *Server) updateSandbox(w http.ResponseWriter, r *http.Request) {
	var req updateRequest
	if err := readOptions(w, r, &req); err != nil {
		writeError(w, r, err, "sandbox.update")
		return
	}
	var opts sandbox.UpdateOptions
	if req.SleepAfter.set {
		opts.SleepAfter = &req.SleepAfter.d
	}
	opts.KeepAlive = req.KeepAlive
	opts.SnapshotOnSleep = req.SnapshotOnSleep
	info, err := s.mgr.Update(r.Context(), r.PathValue("id"), opts)
	if err != nil {
		writeError(w, r, err, "sandbox.update")
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// sleepSandbox is POST /v1/sandboxes/{id}/sleep: sleep now (idempotent).
func (s *Server) sleepSandbox(w http.ResponseWriter, r *http.Request) {
	info, err := s.mgr.Sleep(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err, "sandbox.sleep")
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// wakeSandbox is POST /v1/sandboxes/{id}/wake: the same as start.
func (s *Server) wakeSandbox(w http.ResponseWriter, r *http.Request) {
	info, err := s.mgr.Start(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err, "sandbox.wake")
		return
	}
	writeJSON(w, http.StatusOK, info)
}
