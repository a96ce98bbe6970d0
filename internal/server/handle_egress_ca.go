package server

import (
	"context"
	"net/http"

	"github.com/hutchdev/hutch/errdefs"
)

// EgressCA gives a sandbox's egress CA certificate (internal/egress/mitm).
type EgressCA interface {
	// CACertPEM returns the PEM certificate of sandbox id's CA, making the CA if the sandbox
	// has none yet. Unknown sandbox → SANDBOX_NOT_FOUND.
	CACertPEM(ctx context.Context, id string) ([]byte, error)
}

// egressCAPEM: GET /v1/sandboxes/{id}/egress/ca.pem → 200 application/x-pem-file, the
// certificate of the CA that signs the sandbox's intercepted TLS (never its key). Errors:
// INVALID_SANDBOX_ID, SANDBOX_NOT_FOUND.
func (s *Server) egressCAPEM(w http.ResponseWriter, r *http.Request) {
	if s.egressCA == nil {
		writeError(w, r, errdefs.New(errdefs.CodeNotImplemented, "egress interception is not enabled on this hutchd"), "egress.ca")
		return
	}
	id, err := pathID(r)
	if err != nil {
		writeError(w, r, err, "egress.ca")
		return
	}
	pem, err := s.egressCA.CACertPEM(r.Context(), id.String())
	if err != nil {
		writeError(w, r, err, "egress.ca")
		return
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(pem)
}
