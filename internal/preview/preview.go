// Package preview is hutchd's side of exposed ports and preview URLs: a sandbox's service on
// port P is reachable from outside as
//
//	{scheme}://{P}-{sandboxID}-{token}.{domain}{:publicPort}/
//
// Service records which ports are exposed (with their tokens, in the store) for the
// /v1/sandboxes/{id}/ports API; Proxy is the http.Handler of the preview listener: it parses
// the Host header, checks the token in constant time, and reverse-proxies the request (HTTP,
// streams, WebSocket upgrades) to localhost:P dialled inside the sandbox's network namespace,
// starting a stopped sandbox first. Every request that does not route gets the same 404
// INVALID_TOKEN reply, so a caller learns nothing about which sandboxes or ports exist.
package preview

import (
	"net"
	"slices"
	"strconv"

	"github.com/hutchdev/hutch/errdefs"
)

// Port range an exposed port must be in; below 1024 is refused as the reference does.
const (
	MinPort = 1024
	MaxPort = 65535
)

// Config says how preview URLs look.
type Config struct {
	// Domain is the domain preview hosts are under ("localhost", or a wildcard DNS name).
	Domain string
	// TLS makes URLs https (the preview listener serves TLS).
	TLS bool
	// PublicPort is the port written into URLs; 0, 80 with http and 443 with https are left
	// out.
	PublicPort int
	// ReservedPorts cannot be exposed, on top of those below MinPort.
	ReservedPorts []int
}

// Scheme is "https" with TLS, else "http".
func (c Config) Scheme() string {
	if c.TLS {
		return "https"
	}
	return "http"
}

// URL returns the preview URL of port of sandbox id with token, ending in "/":
// {scheme}://{port}-{id}-{token}.{domain}{:publicPort}/.
func (c Config) URL(id string, port int, token string) string {
	host := strconv.Itoa(port) + "-" + id + "-" + token + "." + c.Domain
	switch {
	case c.PublicPort == 0, c.PublicPort == 80 && !c.TLS, c.PublicPort == 443 && c.TLS:
	default:
		host = net.JoinHostPort(host, strconv.Itoa(c.PublicPort))
	}
	return c.Scheme() + "://" + host + "/"
}

// ValidatePort checks that port may be exposed: MinPort–MaxPort and not reserved. Error:
// INVALID_PORT with context {port}.
func (c Config) ValidatePort(port int) error {
	if port < MinPort || port > MaxPort {
		return errdefs.Newf(errdefs.CodeInvalidPort, "port %d is outside %d-%d", port, MinPort, MaxPort).With("port", port)
	}
	if slices.Contains(c.ReservedPorts, port) {
		return errdefs.Newf(errdefs.CodeInvalidPort, "port %d is reserved on this host", port).With("port", port)
	}
	return nil
}
