package agent

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// maxJSONBody is the largest JSON request body, in bytes (48 MiB).
const maxJSONBody = 48 << 20

func now() time.Time { return time.Now().UTC() }

// writeJSON sends v with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errdefs.ToEnvelope(errdefs.Wrap(errdefs.CodeInternal, err, "encode reply"), ""))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError sends err as an errdefs envelope naming operation op, with the status of its code.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, op string, err error) {
	env := errdefs.ToEnvelope(err, op)
	if env.HTTPStatus >= 500 {
		s.log.WarnContext(r.Context(), "request failed", "path", r.URL.Path, "code", env.Code, "err", err)
	}
	writeJSON(w, env.HTTPStatus, env)
}

// decode reads a JSON body (at most maxJSONBody bytes) into v. An empty body leaves v as is.
// Errors: REQUEST_TOO_LARGE, INVALID_JSON, VALIDATION_FAILED (a field of the wrong type).
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, maxJSONBody)
	err := json.NewDecoder(body).Decode(v)
	if err == nil || errors.Is(err, io.EOF) {
		// Read to the end so the server notices a client that goes away (that cancels the
		// request context, which kills a streamed command).
		if _, derr := io.Copy(io.Discard, body); derr != nil {
			err = derr
		} else {
			return nil
		}
	}
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		return errdefs.Newf(errdefs.CodeRequestTooLarge, "request body is over %d bytes", maxJSONBody).
			With("maxBytes", int64(maxJSONBody))
	case errors.As(err, &typeErr):
		return errdefs.Newf(errdefs.CodeInvalidArgument, "field %q: want %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value).
			With("field", typeErr.Field)
	default:
		return errdefs.Wrap(errdefs.CodeInvalidJSON, err, "invalid JSON body")
	}
}
