package policystore

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/snapshot"
	"github.com/hutchdev/hutch/internal/store"
)

// registry records what is installed live (the egress service's registry, a pure map).
type registry struct {
	mu   sync.Mutex
	live map[string]*policy.Compiled
}

func (r *registry) SetPolicy(id string, c *policy.Compiled) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live[id] = c
	return nil
}

func (r *registry) DeletePolicy(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, id)
}

func (r *registry) mode(id string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.live[id]
	if !ok {
		return "", false
	}
	return c.Spec().Mode, true
}

// snapshots maps snapshot IDs to the sandbox each was taken of.
type snapshots map[string]string

func (s snapshots) Get(_ context.Context, id string) (snapshot.Snapshot, error) {
	sb, ok := s[id]
	if !ok {
		return snapshot.Snapshot{}, errdefs.New(errdefs.CodeSnapshotNotFound, "no snapshot")
	}
	return snapshot.Snapshot{ID: id, SandboxID: sb}, nil
}

func newPolicies(t *testing.T, snaps Snapshots, ids ...string) (*Policies, *registry, *store.Store) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, id := range ids {
		if _, err := st.Insert(ctx, store.Sandbox{ID: id, Status: "stopped"}); err != nil {
			t.Fatal(err)
		}
	}
	al, err := audit.New(filepath.Join(dir, "sandboxes"), 1<<20, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { al.Close() })
	reg := &registry{live: map[string]*policy.Compiled{}}
	return New(Config{Registry: reg, Store: st, Audit: al, Snapshots: snaps}), reg, st
}

var allowlist = policy.Spec{Mode: policy.ModeAllowlist, Allow: []string{"api.example.test"}}

// TestStageCommit: a policy staged by a create is stored and installed at the sandbox's first
// start (Prepare) or by Commit; an unstaged one is neither; a sandbox without a policy runs
// allow-all with no stale live entry.
func TestStageCommit(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		apply    func(p *Policies, id string) error
		wantMode string // "" = no policy stored nor installed
	}{
		{"prepare installs staged", func(p *Policies, id string) error {
			if err := p.Stage(ctx, id, allowlist); err != nil {
				return err
			}
			_, err := p.Prepare(ctx, store.Sandbox{ID: id})
			return err
		}, policy.ModeAllowlist},
		{"commit stores staged", func(p *Policies, id string) error {
			if err := p.Stage(ctx, id, allowlist); err != nil {
				return err
			}
			return p.Commit(ctx, id)
		}, policy.ModeAllowlist},
		{"unstaged is dropped", func(p *Policies, id string) error {
			if err := p.Stage(ctx, id, allowlist); err != nil {
				return err
			}
			p.Unstage(id)
			if err := p.Commit(ctx, id); err != nil {
				return err
			}
			_, err := p.Prepare(ctx, store.Sandbox{ID: id})
			return err
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, reg, st := newPolicies(t, nil, "sb1")
			stale, err := policy.Compile(policy.Spec{Mode: policy.ModeDenyAll})
			if err != nil {
				t.Fatal(err)
			}
			reg.live["sb1"] = stale // a live entry of an earlier sandbox with this ID
			if err := tc.apply(p, "sb1"); err != nil {
				t.Fatal(err)
			}
			mode, live := reg.mode("sb1")
			_, err = st.GetEgressPolicy(ctx, "sb1")
			if tc.wantMode == "" {
				if live || err == nil {
					t.Fatalf("live %v, stored err %v: want no policy", live, err)
				}
				return
			}
			if !live || mode != tc.wantMode || err != nil {
				t.Fatalf("live %v mode %q, stored err %v: want %s stored and installed", live, mode, err, tc.wantMode)
			}
			got, err := p.Get(ctx, "sb1")
			if err != nil || got.Mode != tc.wantMode {
				t.Fatalf("Get = %+v, %v", got, err)
			}
		})
	}
}

// TestInheritFromSnapshot: a sandbox started from a snapshot, with no policy of its own,
// gets the policy of the sandbox the snapshot was taken of, stored as its own.
func TestInheritFromSnapshot(t *testing.T) {
	ctx := context.Background()
	p, reg, st := newPolicies(t, snapshots{"snap1": "parent"}, "parent", "child", "other")
	if _, err := p.Set(ctx, "parent", allowlist); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Prepare(ctx, store.Sandbox{ID: "child", Snapshot: "snap1"}); err != nil {
		t.Fatal(err)
	}
	if mode, ok := reg.mode("child"); !ok || mode != policy.ModeAllowlist {
		t.Fatalf("child live policy %q %v: want inherited allowlist", mode, ok)
	}
	if _, err := st.GetEgressPolicy(ctx, "child"); err != nil {
		t.Fatalf("child's inherited policy not stored: %v", err)
	}
	// A snapshot unknown to the store inherits nothing.
	if _, err := p.Prepare(ctx, store.Sandbox{ID: "other", Snapshot: "gone"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.mode("other"); ok {
		t.Fatal("other got a policy from an unknown snapshot")
	}
}

// TestLoadInvalidFailsClosed: a stored policy that no longer compiles is installed as deny-all
// at load, not skipped (skipping would run the sandbox allow-all).
func TestLoadInvalidFailsClosed(t *testing.T) {
	ctx := context.Background()
	p, reg, st := newPolicies(t, nil, "sb1", "sb2")
	if err := st.PutEgressPolicy(ctx, "sb1", `{"mode": "allowlist", "allow": ["ok.example.test"]}`); err != nil {
		t.Fatal(err)
	}
	if err := st.PutEgressPolicy(ctx, "sb2", `{"mode": "no-such-mode"}`); err != nil {
		t.Fatal(err)
	}
	if err := p.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if mode, _ := reg.mode("sb1"); mode != policy.ModeAllowlist {
		t.Fatalf("sb1 mode %q, want allowlist", mode)
	}
	if mode, _ := reg.mode("sb2"); mode != policy.ModeDenyAll {
		t.Fatalf("sb2 (invalid stored policy) mode %q, want deny-all", mode)
	}
}

// TestSetGetUnknownSandbox: Get and Set on a sandbox that does not exist are SANDBOX_NOT_FOUND
// and store nothing; an invalid spec is EGRESS_POLICY_INVALID.
func TestSetGetUnknownSandbox(t *testing.T) {
	ctx := context.Background()
	p, reg, _ := newPolicies(t, nil, "sb1")
	if _, err := p.Get(ctx, "nope"); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Fatalf("Get unknown: %v", err)
	}
	if _, err := p.Set(ctx, "nope", allowlist); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Fatalf("Set unknown: %v", err)
	}
	if _, err := p.Set(ctx, "sb1", policy.Spec{Mode: "bogus"}); !errdefs.IsCode(err, errdefs.CodeEgressPolicyInvalid) {
		t.Fatalf("Set invalid: %v", err)
	}
	if _, ok := reg.mode("sb1"); ok {
		t.Fatal("an invalid spec was installed")
	}
	spec, err := p.Get(ctx, "sb1")
	if err != nil || spec.Mode != "" {
		t.Fatalf("Get without a policy = %+v, %v: want the zero spec (allow-all)", spec, err)
	}
}
