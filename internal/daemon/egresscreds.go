package daemon

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/inject"
	"github.com/hutchdev/hutch/internal/egress/mitm"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/egress/webhook"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/secret"
	"github.com/hutchdev/hutch/internal/snapshot"
	"github.com/hutchdev/hutch/internal/store"
)

// egressCreds gives sandboxes their egress CA and placeholders (sandbox.EgressCredentials) and
// serves the CA certificate to the API (server.EgressCA).
type egressCreds struct {
	ca    *mitm.Authority
	db    *store.Store
	snaps interface {
		Get(ctx context.Context, id string) (snapshot.Snapshot, error)
	}
	// policy gives a sandbox's current policy snapshot (nil policy: allow-all, no placeholders).
	policy policy.Policy
}

// Prepare makes sure rec has a CA (a sandbox started from a snapshot inherits the CA of the
// sandbox the snapshot was taken of, or the CA recorded with the snapshot once that sandbox is
// gone) and returns the CA and the
// placeholder env vars of its policy.
func (e *egressCreds) Prepare(ctx context.Context, rec store.Sandbox) (sandbox.EgressStart, error) {
	parent := ""
	if rec.Snapshot != "" && e.snaps != nil {
		if snap, err := e.snaps.Get(ctx, rec.Snapshot); err == nil {
			parent = snap.SandboxID
		}
	}
	ca, err := e.ca.EnsureFrom(ctx, rec.ID, parent, rec.Snapshot)
	if err != nil {
		return sandbox.EgressStart{}, err
	}
	es := sandbox.EgressStart{CACertPEM: ca.CertPEM}
	if c := policy.SnapshotFor(e.policy, rec.ID); c != nil {
		for _, ph := range c.Spec().Placeholders {
			val, err := e.db.EnsurePlaceholder(ctx, rec.ID, ph.Secret, inject.NewPlaceholder())
			if err != nil {
				return sandbox.EgressStart{}, err
			}
			env := ph.Env
			if env == "" {
				env = ph.Secret
			}
			if es.Env == nil {
				es.Env = map[string]string{}
			}
			es.Env[env] = ph.Prefix + val
		}
	}
	return es, nil
}

// CACertPEM returns sandbox id's CA certificate, making the CA when it has none yet.
func (e *egressCreds) CACertPEM(ctx context.Context, id string) ([]byte, error) {
	if _, err := e.db.Get(ctx, id); err != nil {
		return nil, err
	}
	ca, err := e.ca.Ensure(ctx, id, "")
	if err != nil {
		return nil, err
	}
	return ca.CertPEM, nil
}

// secretsAPI is the API's view of the secret store (server.Secrets).
type secretsAPI struct {
	*secret.Store
	db *store.Store
}

// UsedBy maps each secret name to the sandboxes whose stored egress policy references it.
func (s secretsAPI) UsedBy(ctx context.Context) (map[string][]string, error) {
	specs, err := s.db.EgressSpecsForSecrets(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for id, js := range specs {
		var spec policy.Spec
		if err := json.Unmarshal([]byte(js), &spec); err != nil {
			return nil, errors.Join(errdefs.New(errdefs.CodeInternal, "stored egress policy of "+id+" is not valid JSON"), err)
		}
		for _, name := range policy.SecretNames(spec) {
			out[name] = append(out[name], id)
		}
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out, nil
}

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
