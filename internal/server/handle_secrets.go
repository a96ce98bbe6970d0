package server

import (
	"context"
	"net/http"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/secret"
)

// Secrets is what the API needs of the secret store (internal/secret plus the policies that
// use each secret).
type Secrets interface {
	Set(ctx context.Context, name string, value []byte) (secret.Info, error)
	List(ctx context.Context) ([]secret.Info, error)
	Delete(ctx context.Context, name string) error
	// UsedBy maps secret names to the IDs of the sandboxes whose egress policy uses them.
	UsedBy(ctx context.Context) (map[string][]string, error)
}

func (s *Server) secretsEnabled(w http.ResponseWriter, r *http.Request) bool {
	if s.secrets == nil {
		writeError(w, r, errdefs.New(errdefs.CodeNotImplemented, "secrets are not enabled on this hutchd"), "secret")
		return false
	}
	return true
}

// putSecret: PUT /v1/secrets/{name} {"value": "…"} → 204. The value is write-only: no
// response, log line or error message ever carries it. Errors: INVALID_SECRET, INVALID_JSON.
func (s *Server) putSecret(w http.ResponseWriter, r *http.Request) {
	if !s.secretsEnabled(w, r) {
		return
	}
	name := r.PathValue("name")
	if err := secret.ValidateName(name); err != nil {
		writeError(w, r, err, "secret.set")
		return
	}
	var req v1.PutSecretRequest
	if err := readJSON(w, r, &req); err != nil {
		writeError(w, r, err, "secret.set")
		return
	}
	if req.Value == nil {
		writeError(w, r, errdefs.New(errdefs.CodeInvalidSecret, `body must be {"value": "..."}`).With("name", name), "secret.set")
		return
	}
	if _, err := s.secrets.Set(r.Context(), name, []byte(*req.Value)); err != nil {
		writeError(w, r, err, "secret.set")
		return
	}
	s.log.InfoContext(r.Context(), "secret set", "name", name)
	w.WriteHeader(http.StatusNoContent)
}

// listSecrets: GET /v1/secrets → {"secrets": [{name, createdAt, updatedAt, usedBy}]} (never
// values).
func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) {
	if !s.secretsEnabled(w, r) {
		return
	}
	list, err := s.secrets.List(r.Context())
	if err != nil {
		writeError(w, r, err, "secret.list")
		return
	}
	used, err := s.secrets.UsedBy(r.Context())
	if err != nil {
		writeError(w, r, err, "secret.list")
		return
	}
	for i := range list {
		if u := used[list[i].Name]; len(u) > 0 {
			list[i].UsedBy = u
		}
	}
	writeJSON(w, http.StatusOK, v1.SecretList{Reply: v1.Stamped(), Secrets: toSecrets(list)})
}

// deleteSecret: DELETE /v1/secrets/{name} → 204. A secret that a sandbox's egress policy
// still references is not deleted: 409 SECRET_IN_USE with context {usedBy}; change those
// policies first. Unknown → 404 SECRET_NOT_FOUND.
func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) {
	if !s.secretsEnabled(w, r) {
		return
	}
	name := r.PathValue("name")
	if err := secret.ValidateName(name); err != nil {
		writeError(w, r, err, "secret.delete")
		return
	}
	used, err := s.secrets.UsedBy(r.Context())
	if err != nil {
		writeError(w, r, err, "secret.delete")
		return
	}
	if u := used[name]; len(u) > 0 {
		writeError(w, r, errdefs.Newf(errdefs.CodeSecretInUse, "secret %q is used by the egress policy of %d sandbox(es): remove it from them first", name, len(u)).
			With("name", name).With("usedBy", u), "secret.delete")
		return
	}
	if err := s.secrets.Delete(r.Context(), name); err != nil {
		writeError(w, r, err, "secret.delete")
		return
	}
	s.log.InfoContext(r.Context(), "secret deleted", "name", name)
	w.WriteHeader(http.StatusNoContent)
}
