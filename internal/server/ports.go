package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/preview"
)

// Ports is what the API needs for exposed ports; *preview.Service implements it.
type Ports interface {
	Expose(ctx context.Context, id string, req preview.ExposeRequest) (preview.Port, error)
	Unexpose(ctx context.Context, id string, port int) error
	List(ctx context.Context, id string) ([]preview.Port, error)
}

// exposePort: POST /v1/sandboxes/{id}/ports {port, name?, token?} →
// {success, port, name, url, token, exposedAt, timestamp}.
func (s *Server) exposePort(w http.ResponseWriter, r *http.Request) {
	if !s.portsEnabled(w, r) {
		return
	}
	var req v1.ExposePortRequest
	if err := readJSON(w, r, &req); err != nil {
		writeError(w, r, err, "port.expose")
		return
	}
	p, err := s.ports.Expose(r.Context(), r.PathValue("id"), fromExposeRequest(req))
	if err != nil {
		writeError(w, r, err, "port.expose")
		return
	}
	writeJSON(w, http.StatusOK, v1.ExposePortResult{Success: true, ExposedPort: toPort(p), Timestamp: portReplyTime()})
}

// listPorts: GET /v1/sandboxes/{id}/ports → {success, ports: [...], timestamp}.
func (s *Server) listPorts(w http.ResponseWriter, r *http.Request) {
	if !s.portsEnabled(w, r) {
		return
	}
	ps, err := s.ports.List(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err, "port.list")
		return
	}
	writeJSON(w, http.StatusOK, v1.PortList{Reply: v1.Reply{Success: true, Timestamp: portReplyTime()}, Ports: toPorts(ps)})
}

// unexposePort: DELETE /v1/sandboxes/{id}/ports/{port} → {success, port, timestamp}.
func (s *Server) unexposePort(w http.ResponseWriter, r *http.Request) {
	if !s.portsEnabled(w, r) {
		return
	}
	raw := r.PathValue("port")
	port, err := strconv.Atoi(raw)
	if err != nil {
		writeError(w, r, errdefs.Newf(errdefs.CodeInvalidPort, "port %q is not a number", raw).With("port", raw), "port.unexpose")
		return
	}
	if err := s.ports.Unexpose(r.Context(), r.PathValue("id"), port); err != nil {
		writeError(w, r, err, "port.unexpose")
		return
	}
	writeJSON(w, http.StatusOK, v1.UnexposePortResult{Reply: v1.Reply{Success: true, Timestamp: portReplyTime()}, Port: port})
}

// portsEnabled answers NOT_IMPLEMENTED when the server was built without a Ports.
func (s *Server) portsEnabled(w http.ResponseWriter, r *http.Request) bool {
	if s.ports == nil {
		writeError(w, r, errdefs.New(errdefs.CodeNotImplemented, "exposed ports are not available on this server"), "")
		return false
	}
	return true
}

// portReplyTime is a reply's timestamp, in UTC.
func portReplyTime() time.Time { return time.Now().UTC() }
