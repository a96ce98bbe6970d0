package client

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	v1 "github.com/hutchdev/hutch/api/v1"
)

// ExposedPort is a sandbox port reachable from outside through its preview URL.
type ExposedPort = v1.ExposedPort

// ExposeOptions are the optional parameters of ExposePort. The zero value means no name and
// a random token.
type ExposeOptions struct {
	// Name is a label for the port, at most 63 printable characters.
	Name string
	// Token is the URL token, 8–16 characters of [a-z0-9_]; empty means the server makes a
	// random 16-character one (or keeps the stored one when the port is already exposed).
	Token string
}

// ExposePort makes port (1024–65535) of the sandbox reachable at a preview URL and returns it
// (POST /v1/sandboxes/{id}/ports). Exposing an exposed port again with the same token, or
// with none, is idempotent and returns the stored token.
//
// Errors: INVALID_PORT (ErrInvalidArgument, context {port}) for a port out of range or
// reserved; INVALID_PORT_TOKEN (ErrInvalidArgument) for a bad opts.Token;
// PORT_ALREADY_EXPOSED (ErrConflict) when the port is exposed with another token;
// PORT_TOKEN_IN_USE (ErrConflict) when another port of the sandbox uses opts.Token;
// SANDBOX_NOT_FOUND (ErrNotFound).
func (s *Sandbox) ExposePort(ctx context.Context, port int, opts ExposeOptions) (ExposedPort, error) {
	body := v1.ExposePortRequest{Port: port, Name: opts.Name, Token: opts.Token}
	var reply ExposedPort
	if err := s.do(ctx, http.MethodPost, "/ports", body, &reply); err != nil {
		return ExposedPort{}, fmt.Errorf("expose port %d of sandbox %q: %w", port, s.sandboxID, err)
	}
	return reply, nil
}

// UnexposePort removes the preview URL of port (DELETE /v1/sandboxes/{id}/ports/{port});
// requests to it then get 404 INVALID_TOKEN. Errors: PORT_NOT_EXPOSED (ErrNotFound);
// SANDBOX_NOT_FOUND.
func (s *Sandbox) UnexposePort(ctx context.Context, port int) error {
	if err := s.do(ctx, http.MethodDelete, "/ports/"+strconv.Itoa(port), nil, nil); err != nil {
		return fmt.Errorf("unexpose port %d of sandbox %q: %w", port, s.sandboxID, err)
	}
	return nil
}

// ExposedPorts returns the sandbox's exposed ports (GET /v1/sandboxes/{id}/ports).
// Errors: SANDBOX_NOT_FOUND.
func (s *Sandbox) ExposedPorts(ctx context.Context) ([]ExposedPort, error) {
	var reply v1.PortList
	if err := s.do(ctx, http.MethodGet, "/ports", nil, &reply); err != nil {
		return nil, fmt.Errorf("list exposed ports of sandbox %q: %w", s.sandboxID, err)
	}
	return reply.Ports, nil
}
