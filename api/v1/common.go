package v1

import (
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// Reply is the pair of fields every success reply of a forwarded (agent) operation, of the
// ports, backups, snapshots and secrets endpoints carries beside its own: success (always true)
// and timestamp (RFC 3339, UTC, when the reply was made). Types embed it.
type Reply struct {
	Success   bool      `json:"success"`
	Timestamp time.Time `json:"timestamp"`
}

// Stamped returns a Reply made now, in UTC.
func Stamped() Reply { return Reply{Success: true, Timestamp: time.Now().UTC()} }

// ErrorEnvelope is the body of every non-2xx reply: {code, message, httpStatus, context?,
// operation?, timestamp}. code is a stable errdefs.Code (clients must accept unknown codes and
// class them by httpStatus); message is for humans, never parsed; context holds machine
// details (path, timeoutMs, pointer, …); operation is the route's dotted name (Route.Operation).
type ErrorEnvelope = errdefs.Envelope

// StreamError is the terminal "error" event of an event stream (execute/stream, read/stream,
// process stream, run-code, images/build, egress/events): {type:"error", code, error,
// context?, timestamp?}. A client that sees a stream end before its terminal event reports
// STREAM_INCOMPLETE itself; no server sends that code.
type StreamError struct {
	Type    string         `json:"type"` // "error"
	Code    errdefs.Code   `json:"code"`
	Error   string         `json:"error"`
	Context map[string]any `json:"context,omitempty"`
	// Timestamp is absent in the frames of images/build and egress/events.
	Timestamp time.Time `json:"timestamp,omitzero"`
}

// Deleted is the reply of the DELETE routes of hutchd's own resources (backups, snapshots):
// {success, id, timestamp}. destroySandbox replies DestroySandboxResult (no timestamp).
type Deleted struct {
	Reply
	ID string `json:"id"`
}

// Health is the reply of GET /v1/health (no token needed): {status:"ok", version}.
type Health struct {
	Status  string `json:"status"` // "ok"
	Version string `json:"version"`
}
