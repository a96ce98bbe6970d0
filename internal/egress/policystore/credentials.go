package policystore

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/inject"
	"github.com/hutchdev/hutch/internal/egress/mitm"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/secret"
	"github.com/hutchdev/hutch/internal/store"
)

// Credentials gives sandboxes their egress CA and placeholders (sandbox.EgressCredentials) and
// serves the CA certificate to the API (server.EgressCA).
type Credentials struct {
	CA    *mitm.Authority
	Store *store.Store
	// Snapshots finds the sandbox a snapshot was taken of (CA inheritance); nil: none.
	Snapshots Snapshots
	// Policy gives a sandbox's current policy (nil: allow-all, no placeholders).
	Policy policy.Policy
}

// Prepare makes sure rec has a CA (a sandbox started from a snapshot inherits the CA of the
// sandbox the snapshot was taken of, or the CA recorded with the snapshot once that sandbox is
// gone) and returns the CA and the
// placeholder env vars of its policy.
func (e *Credentials) Prepare(ctx context.Context, rec store.Sandbox) (sandbox.EgressStart, error) {
	parent := ""
	if rec.Snapshot != "" && e.Snapshots != nil {
		if snap, err := e.Snapshots.Get(ctx, rec.Snapshot); err == nil {
			parent = snap.SandboxID
		}
	}
	ca, err := e.CA.EnsureFrom(ctx, rec.ID, parent, rec.Snapshot)
	if err != nil {
		return sandbox.EgressStart{}, err
	}
	es := sandbox.EgressStart{CACertPEM: ca.CertPEM}
	if c := policy.SnapshotFor(e.Policy, rec.ID); c != nil {
		for _, ph := range c.Spec().Placeholders {
			val, err := e.Store.EnsurePlaceholder(ctx, rec.ID, ph.Secret, inject.NewPlaceholder())
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
func (e *Credentials) CACertPEM(ctx context.Context, id string) ([]byte, error) {
	if _, err := e.Store.Get(ctx, id); err != nil {
		return nil, err
	}
	ca, err := e.CA.Ensure(ctx, id, "")
	if err != nil {
		return nil, err
	}
	return ca.CertPEM, nil
}

// Secrets is the API's view of the secret store (server.Secrets): the store plus which
// sandboxes' policies use each secret.
type Secrets struct {
	*secret.Store
	DB *store.Store
}

// UsedBy maps each secret name to the sandboxes whose stored egress policy references it.
func (s Secrets) UsedBy(ctx context.Context) (map[string][]string, error) {
	specs, err := s.DB.EgressSpecsForSecrets(ctx)
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
