package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
)

// Egress policy types (api/v1's egress.go). EgressPolicy is the JSON document of
// GET/PUT/PATCH /v1/sandboxes/{id}/egress and of SandboxOptions.Egress:
//
//	mode          "allow-all" (default), "allowlist" or "deny-all"
//	allow, deny   host patterns: "name.example", "*.example" (whole leftmost labels; never
//	              "example" itself) or "*"; deny wins
//	ports         TCP ports allowed besides 80 and 443
//	inspect       "rules" (default: TLS is terminated only for hosts with rules or
//	              placeholders), "all" or "none"
//	rules         per-host actions: inject (setHeaders/removeHeaders/basicAuth with
//	              "${secrets.NAME}"), deny, handler, pass; optional match {methods, path
//	              {exact|prefix}} and upstream
//	placeholders  secrets bound to env vars whose placeholder value is swapped for the real
//	              one only towards hosts
//
// Invalid policies fail with EGRESS_POLICY_INVALID (ErrInvalidArgument) whose context
// "pointer" is the JSON pointer of the bad field ("/rules/0/hosts/1").
type (
	EgressPolicy      = v1.EgressPolicy
	EgressRule        = v1.EgressRule
	EgressMatch       = v1.EgressMatch
	EgressPathMatch   = v1.EgressPathMatch
	EgressInject      = v1.EgressInject
	EgressBasicAuth   = v1.EgressBasicAuth
	EgressPlaceholder = v1.EgressPlaceholder
	EgressDNS         = v1.EgressDNS
	// EgressEvent is one audit record: kind dns, conn, http, violation, policy.updated or
	// limit, with a per-sandbox increasing Seq. It never holds header values, bodies or secret
	// values.
	EgressEvent = v1.EgressEvent
)

// Egress returns the sandbox's egress policy (GET /v1/sandboxes/{id}/egress); a sandbox
// without one reports {"mode":"allow-all"}. Errors: SANDBOX_NOT_FOUND.
func (s *Sandbox) Egress(ctx context.Context) (*EgressPolicy, error) {
	var p EgressPolicy
	if err := s.c.call(ctx, request{method: http.MethodGet, path: sandboxPath(s.sandboxID, "/egress")}, &p); err != nil {
		return nil, fmt.Errorf("get egress policy of %s: %w", s.sandboxID, err)
	}
	return &p, nil
}

// SetEgress replaces the sandbox's egress policy (PUT /v1/sandboxes/{id}/egress) and returns
// it as stored. It applies at once: open connections the new policy no longer allows are
// closed. Errors: EGRESS_POLICY_INVALID, SANDBOX_NOT_FOUND.
func (s *Sandbox) SetEgress(ctx context.Context, p EgressPolicy) (*EgressPolicy, error) {
	var out EgressPolicy
	if err := s.c.call(ctx, request{method: http.MethodPut, path: sandboxPath(s.sandboxID, "/egress"), json: p}, &out); err != nil {
		return nil, fmt.Errorf("set egress policy of %s: %w", s.sandboxID, err)
	}
	return &out, nil
}

// PatchEgress applies a JSON merge patch (RFC 7386: null removes a field, arrays are replaced
// whole) to the sandbox's egress policy (PATCH /v1/sandboxes/{id}/egress) and returns the
// result. patch is marshalled as JSON (a map, a struct, or json.RawMessage).
func (s *Sandbox) PatchEgress(ctx context.Context, patch any) (*EgressPolicy, error) {
	var out EgressPolicy
	if err := s.c.call(ctx, request{method: http.MethodPatch, path: sandboxPath(s.sandboxID, "/egress"), json: patch}, &out); err != nil {
		return nil, fmt.Errorf("patch egress policy of %s: %w", s.sandboxID, err)
	}
	return &out, nil
}

// EgressEvents streams the sandbox's egress audit events with Seq > since, oldest first
// (GET /v1/sandboxes/{id}/egress/events). Without follow the sequence ends after the stored
// events; with follow it goes on with new ones until ctx ends or the caller stops. A failure
// is yielded once as the error, then the sequence ends.
func (s *Sandbox) EgressEvents(ctx context.Context, since uint64, follow bool) iter.Seq2[EgressEvent, error] {
	return func(yield func(EgressEvent, error) bool) {
		q := url.Values{"since": {strconv.FormatUint(since, 10)}}
		if follow {
			q.Set("follow", "true")
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		resp, err := s.c.send(ctx, request{method: http.MethodGet, path: sandboxPath(s.sandboxID, "/egress/events"), query: q, accept: "text/event-stream"})
		if err != nil {
			yield(EgressEvent{}, fmt.Errorf("egress events of %s: %w", s.sandboxID, err))
			return
		}
		defer resp.Body.Close()
		r := sse.NewReader(resp.Body)
		for {
			frame, err := r.Next()
			if err != nil {
				if errors.Is(err, io.EOF) && !follow {
					return
				}
				if ctx.Err() != nil {
					return
				}
				yield(EgressEvent{}, fmt.Errorf("egress events of %s: %w", s.sandboxID, streamIncomplete(ctx, err)))
				return
			}
			var wire v1.EgressEventFrame
			if err := json.Unmarshal(frame, &wire); err != nil {
				yield(EgressEvent{}, fmt.Errorf("egress events of %s: %w", s.sandboxID, err))
				return
			}
			switch wire.Type {
			case "event":
				if !yield(wire.EgressEvent, nil) {
					return
				}
			case "error":
				yield(EgressEvent{}, fmt.Errorf("egress events of %s: %w", s.sandboxID, errdefs.New(wire.Code, wire.Error)))
				return
			}
		}
	}
}
