package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	v1 "github.com/hutchdev/hutch/api/v1"
)

// Secret is a stored secret's public view: hutchd never returns a secret's value.
type Secret = v1.Secret

// SetSecret stores or replaces the secret name (PUT /v1/secrets/{name}). name is 1–128 of
// [A-Za-z0-9_], not starting with a digit; value is 8 bytes–64 KiB of UTF-8 without control
// characters. Sandboxes never see the value: egress rules use it as "${secrets.NAME}", and
// placeholders stand in for it. A new value applies from the next request on.
// Errors: INVALID_SECRET (ErrInvalidArgument).
func (c *Client) SetSecret(ctx context.Context, name, value string) error {
	body := v1.PutSecretRequest{Value: &value}
	if err := c.call(ctx, request{method: http.MethodPut, path: "/v1/secrets/" + url.PathEscape(name), json: body}, nil); err != nil {
		return fmt.Errorf("set secret %q: %w", name, err)
	}
	return nil
}

// SetSecretFrom is SetSecret with the value read from r (at most 64 KiB + 1 bytes are read;
// one trailing newline is dropped, as shells and files add it).
func (c *Client) SetSecretFrom(ctx context.Context, name string, r io.Reader) error {
	b, err := io.ReadAll(io.LimitReader(r, 64<<10+2))
	if err != nil {
		return fmt.Errorf("set secret %q: read value: %w", name, err)
	}
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return c.SetSecret(ctx, name, string(b))
}

// Secrets lists the stored secrets, by name (GET /v1/secrets); never their values.
func (c *Client) Secrets(ctx context.Context) ([]Secret, error) {
	var reply v1.SecretList
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/secrets"}, &reply); err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return reply.Secrets, nil
}

// DeleteSecret removes the secret name (DELETE /v1/secrets/{name}). Errors: SECRET_NOT_FOUND
// (ErrNotFound); SECRET_IN_USE (ErrConflict, context {usedBy}) while a sandbox's egress
// policy references it.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	if err := c.call(ctx, request{method: http.MethodDelete, path: "/v1/secrets/" + url.PathEscape(name)}, nil); err != nil {
		return fmt.Errorf("delete secret %q: %w", name, err)
	}
	return nil
}

// EgressCA returns the PEM certificate of the CA that signs the sandbox's intercepted TLS
// connections (GET /v1/sandboxes/{id}/egress/ca.pem); never its key. Inside the sandbox the
// same certificate is at /run/hutch/egress-ca.pem and in the system bundle.
// Errors: SANDBOX_NOT_FOUND (ErrNotFound).
func (s *Sandbox) EgressCA(ctx context.Context) ([]byte, error) {
	resp, err := s.c.send(ctx, request{method: http.MethodGet, path: "/v1/sandboxes/" + url.PathEscape(s.sandboxID) + "/egress/ca.pem", accept: "application/x-pem-file"})
	if err != nil {
		return nil, fmt.Errorf("egress CA of sandbox %q: %w", s.sandboxID, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("egress CA of sandbox %q: %w", s.sandboxID, err)
	}
	return b, nil
}
