package daemon

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/hutchdev/hutch/internal/egress/webhook"
	"github.com/hutchdev/hutch/internal/sandbox"
)

// upstreamRoots is the system root pool plus the PEM files named (for upstreams of
// intercepted hosts). Nil files: nil (the system roots).
func upstreamRoots(files []string) (*x509.CertPool, error) {
	if len(files) == 0 {
		return nil, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	for _, f := range files {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("egress root CA: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("egress root CA %s: no PEM certificate", f)
		}
	}
	return pool, nil
}

// egressResolver resolves sandbox destinations through servers (ip:port, tried in order);
// none: nil (the host's resolver).
func egressResolver(servers []string) *net.Resolver {
	if len(servers) == 0 {
		return nil
	}
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			var last error
			for _, s := range servers {
				c, err := d.DialContext(ctx, network, s)
				if err == nil {
					return c, nil
				}
				last = err
			}
			return nil, last
		},
	}
}

// stopper stops a sandbox whose placeholder violation asks for it (onViolation
// "block_and_stop"); the manager is set once it exists.
type stopper struct {
	mgr   atomic.Pointer[sandbox.Manager]
	log   *slog.Logger
	audit sandbox.Auditor // the stop is recorded in the audit log
}

func (s *stopper) stop(id string) {
	m := s.mgr.Load()
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) //nolint:forbidigo // called from a sandbox's stop, which has no ctx to give
	defer cancel()
	if _, err := m.Stop(ctx, id); err != nil {
		s.log.Warn("stop after placeholder violation failed", "sandbox_id", id, "err", err)
		return
	}
	s.log.Warn("sandbox stopped after a placeholder violation", "sandbox_id", id)
	s.audit.Decision(ctx, sandbox.AuditStopped, id, slog.String("reason", "egress placeholder violation"))
}

// egressHandlers builds the configured operator handlers.
func egressHandlers(cfgs map[string]webhook.Config) (map[string]*webhook.Handler, error) {
	out := make(map[string]*webhook.Handler, len(cfgs))
	for name, c := range cfgs {
		h, err := webhook.New(name, c)
		if err != nil {
			return nil, err
		}
		out[name] = h
	}
	return out, nil
}
