package v1

import "time"

// ExposePortRequest is the body of POST /v1/sandboxes/{id}/ports (hutchd's own route; the
// reference system's exposePort()). Port is 1024–65535 (else 400 INVALID_PORT); Token is 8–16
// of [a-z0-9_] (else 400 INVALID_PORT_TOKEN; the reference allows 1, but a short token can be
// guessed), default 16 random characters; Name is at most 63 printable characters. The same
// port again with the same token and name is idempotent; otherwise 409 PORT_ALREADY_EXPOSED;
// a token another port of the sandbox uses → 409 PORT_TOKEN_IN_USE.
type ExposePortRequest struct {
	Port  int    `json:"port"`
	Name  string `json:"name,omitempty"`
	Token string `json:"token,omitempty"`
}

// ExposedPort is an exposed port. URL is the preview URL,
// {scheme}://{port}-{id}-{token}.{previewDomain}{:publicPort}/, served by hutchd's preview
// listener without a bearer token: the token in the host name is the credential.
type ExposedPort struct {
	Port int `json:"port"`
	// Name is the label; empty when none was given.
	Name      string    `json:"name"`
	URL       string    `json:"url"`
	Token     string    `json:"token"`
	ExposedAt time.Time `json:"exposedAt"`
}

// ExposePortResult is the reply of expose: {success, port, name, url, token, exposedAt,
// timestamp}.
type ExposePortResult struct {
	Success bool `json:"success"`
	ExposedPort
	Timestamp time.Time `json:"timestamp"`
}

// PortList is the reply of GET ports, ordered by port.
type PortList struct {
	Reply
	Ports []ExposedPort `json:"ports"`
}

// UnexposePortResult is the reply of DELETE ports/{port}; not exposed → 404 PORT_NOT_EXPOSED.
// The URL stops routing at once; open connections are not cut.
type UnexposePortResult struct {
	Reply
	Port int `json:"port"`
}
