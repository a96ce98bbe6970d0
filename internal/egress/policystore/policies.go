// Package policystore keeps sandboxes' egress policies and egress credentials across starts,
// restarts and snapshots: policies are stored as JSON in the store's egress_policies and
// installed in the egress service's live registry before a sandbox's first process runs; a
// sandbox started from a snapshot inherits the policy and the CA of the sandbox the snapshot
// was taken of. It serves the API (server.EgressPolicies, server.EgressCA, server.Secrets'
// UsedBy) and the sandbox manager (sandbox.EgressCredentials).
package policystore

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/egress/webhook"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/snapshot"
	"github.com/hutchdev/hutch/internal/store"
)

// Registry is the egress service's live policy registry (*egress.Service).
type Registry interface {
	SetPolicy(sandboxID string, c *policy.Compiled) error
	DeletePolicy(sandboxID string)
}

// Snapshots looks snapshot records up (snapshot.Records).
type Snapshots interface {
	Get(ctx context.Context, id string) (snapshot.Snapshot, error)
}

// Config is what Policies work with.
type Config struct {
	Registry Registry
	Store    *store.Store
	// Audit is the per-sandbox egress event log: served by Events and Subscribe, removed by
	// Forget.
	Audit *audit.Log
	// Lookups are the names a policy may refer to (see Lookups).
	Lookups policy.Lookups
	// Snapshots finds the sandbox a snapshot was taken of (policy inheritance); nil: none is
	// inherited.
	Snapshots Snapshots
	// Next is the credential side (Credentials), asked after the policy is installed; nil:
	// none.
	Next sandbox.EgressCredentials
	Log  *slog.Logger // nil: discarded
}

// Policies keeps sandboxes' egress policies: stored as JSON in egress_policies, live in the
// egress service's registry. It serves the API (server.EgressPolicies) and runs before the
// egress credential side at every sandbox start (sandbox.EgressCredentials), so a sandbox's
// first process already runs under its policy:
//
//   - a stored policy is (re)installed;
//   - a policy staged by POST /v1/sandboxes {egress} is stored and installed;
//   - a sandbox started from a snapshot (forks included) without either inherits the policy
//     of the sandbox the snapshot was taken of, while that sandbox's row exists;
//   - otherwise the sandbox runs allow-all.
type Policies struct {
	eg      Registry
	db      *store.Store
	audit   *audit.Log
	log     *slog.Logger
	lookups policy.Lookups
	snaps   Snapshots
	// next is the credential side (CA, placeholders); it reads the policy installed here.
	next sandbox.EgressCredentials

	mu sync.Mutex
	// pending are specs staged by a create request, until the sandbox's first start.
	pending map[string]*policy.Compiled
}

// New returns the Policies of cfg. Call Load before the sandboxes are recovered.
func New(cfg Config) *Policies {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Policies{eg: cfg.Registry, db: cfg.Store, audit: cfg.Audit, log: log, lookups: cfg.Lookups, snaps: cfg.Snapshots, next: cfg.Next}
}

// Load installs every stored policy (hutchd start). A stored policy that no longer compiles
// is installed as deny-all (fail closed) and logged.
func (e *Policies) Load(ctx context.Context) error {
	rows, err := e.db.ListEgressPolicies(ctx)
	if err != nil {
		return err
	}
	for _, row := range rows {
		if err := e.eg.SetPolicy(row.SandboxID, e.compileStored(row)); err != nil {
			e.log.Warn("stored egress policy not installed", "sandbox_id", row.SandboxID, "err", err)
		}
	}
	if len(rows) > 0 {
		e.log.Info("egress policies loaded", "count", len(rows))
	}
	return nil
}

func (e *Policies) compileStored(row store.EgressPolicy) *policy.Compiled {
	var spec policy.Spec
	err := json.Unmarshal([]byte(row.SpecJSON), &spec)
	var c *policy.Compiled
	if err == nil {
		c, err = policy.Compile(spec)
	}
	if err != nil {
		e.log.Error("stored egress policy is invalid: the sandbox gets deny-all", "sandbox_id", row.SandboxID, "err", err)
		c, _ = policy.Compile(policy.Spec{Mode: policy.ModeDenyAll})
	}
	return c
}

// Prepare installs rec's policy (see the type's doc), then asks the credential side.
func (e *Policies) Prepare(ctx context.Context, rec store.Sandbox) (sandbox.EgressStart, error) {
	if err := e.ensure(ctx, rec); err != nil {
		return sandbox.EgressStart{}, err
	}
	if e.next == nil {
		return sandbox.EgressStart{}, nil
	}
	return e.next.Prepare(ctx, rec)
}

func (e *Policies) ensure(ctx context.Context, rec store.Sandbox) error {
	row, err := e.db.GetEgressPolicy(ctx, rec.ID)
	switch {
	case err == nil:
		if err := e.eg.SetPolicy(rec.ID, e.compileStored(row)); err != nil {
			e.log.WarnContext(ctx, "stored egress policy not installed", "sandbox_id", rec.ID, "err", err)
		}
		return nil
	case !errdefs.IsCode(err, errdefs.CodeNotFound):
		return err
	}
	e.mu.Lock()
	c, staged := e.pending[rec.ID]
	e.mu.Unlock()
	if staged {
		return e.store(ctx, rec.ID, c)
	}
	if rec.Snapshot != "" && e.snaps != nil {
		if snap, err := e.snaps.Get(ctx, rec.Snapshot); err == nil && snap.SandboxID != "" && snap.SandboxID != rec.ID {
			if prow, err := e.db.GetEgressPolicy(ctx, snap.SandboxID); err == nil {
				e.log.Info("egress policy inherited", "sandbox_id", rec.ID, "from", snap.SandboxID)
				return e.store(ctx, rec.ID, e.compileStored(prow))
			}
		}
	}
	e.eg.DeletePolicy(rec.ID) // a stale entry of an earlier sandbox with this ID
	return nil
}

// store persists c for id and installs it.
func (e *Policies) store(ctx context.Context, id string, c *policy.Compiled) error {
	js, err := json.Marshal(c.Spec())
	if err != nil {
		return err
	}
	if err := e.db.PutEgressPolicy(ctx, id, string(js)); err != nil {
		return err
	}
	e.mu.Lock()
	delete(e.pending, id)
	e.mu.Unlock()
	return e.eg.SetPolicy(id, c)
}

// Lookups returns the names a policy may refer to (policy.Validate): the secrets
// secretExists knows, the operator upstreams and the operator handlers of hutchd's config
// (--upstream, --egress-handler).
func Lookups(secretExists func(ctx context.Context, name string) bool, upstreams map[string]string, handlers map[string]*webhook.Handler) policy.Lookups {
	return policy.Lookups{
		Secret:   func(name string) bool { return secretExists(context.Background(), name) }, //nolint:forbidigo // policy.Lookups.Secret takes no ctx
		Upstream: func(name string) bool { _, ok := upstreams[name]; return ok },
		Handler:  func(name string) bool { return handlers[name] != nil },
	}
}

// Validate checks spec against the rules and the daemon's secrets, handlers and upstreams
// (Config.Lookups), and compiles it.
func (e *Policies) Validate(spec policy.Spec) (*policy.Compiled, error) {
	if err := policy.Validate(spec, e.lookups); err != nil {
		return nil, err
	}
	return policy.Compile(spec)
}

// Stage validates spec and keeps it for the sandbox id about to be created.
func (e *Policies) Stage(_ context.Context, id string, spec policy.Spec) error {
	c, err := e.Validate(spec)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pending == nil {
		e.pending = map[string]*policy.Compiled{}
	}
	e.pending[id] = c
	return nil
}

// Unstage drops a staged spec (the create failed or found an existing sandbox).
func (e *Policies) Unstage(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pending, id)
}

// Commit stores a staged spec once the sandbox exists (when its start has not done so).
func (e *Policies) Commit(ctx context.Context, id string) error {
	e.mu.Lock()
	c, ok := e.pending[id]
	e.mu.Unlock()
	if !ok {
		return nil
	}
	return e.store(ctx, id, c)
}

// Get returns id's policy (the zero Spec, allow-all, when it has none). The sandbox must exist.
func (e *Policies) Get(ctx context.Context, id string) (policy.Spec, error) {
	if _, err := e.db.Get(ctx, id); err != nil {
		return policy.Spec{}, err
	}
	row, err := e.db.GetEgressPolicy(ctx, id)
	if errdefs.IsCode(err, errdefs.CodeNotFound) {
		return policy.Spec{}, nil
	}
	if err != nil {
		return policy.Spec{}, err
	}
	var spec policy.Spec
	if err := json.Unmarshal([]byte(row.SpecJSON), &spec); err != nil {
		return policy.Spec{}, fmt.Errorf("stored egress policy of %s: %w", id, err)
	}
	return spec, nil
}

// Set validates spec, stores it and applies it live. The sandbox must exist.
func (e *Policies) Set(ctx context.Context, id string, spec policy.Spec) (policy.Spec, error) {
	if _, err := e.db.Get(ctx, id); err != nil {
		return policy.Spec{}, err
	}
	c, err := e.Validate(spec)
	if err != nil {
		return policy.Spec{}, err
	}
	if err := e.store(ctx, id, c); err != nil {
		return policy.Spec{}, err
	}
	return c.Spec(), nil
}

// Forget drops a destroyed sandbox's live policy and its audit log (the row went with the
// sandbox).
func (e *Policies) Forget(_ context.Context, id string) {
	e.Unstage(id)
	e.eg.DeletePolicy(id)
	e.audit.Remove(id)
}

// Events returns id's audit events after since.
func (e *Policies) Events(id string, since uint64, max int) ([]audit.Event, error) {
	return e.audit.Read(id, since, max)
}

// Subscribe follows id's audit events.
func (e *Policies) Subscribe(id string) (<-chan audit.Event, func()) {
	return e.audit.Subscribe(id)
}
