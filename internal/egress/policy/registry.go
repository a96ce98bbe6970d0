package policy

import (
	"context"
	"sync"
	"sync/atomic"
)

// Registry holds one Compiled policy per sandbox and implements Policy by looking the
// sandbox's snapshot up. Sandboxes without an entry get the zero Spec (allow-all). Snapshots
// are swapped atomically: a decision in flight uses the old one, the next the new one.
// Safe for concurrent use.
type Registry struct {
	mu sync.RWMutex
	// m maps sandbox IDs to their current snapshot.
	m map[string]*atomic.Pointer[Compiled]
	// watchers are called after every Set and Delete.
	watchers []func(sandboxID string, old, new *Compiled)
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{m: map[string]*atomic.Pointer[Compiled]{}} }

// Snapshot returns sandboxID's current policy; nil (allow-all) when none is set.
func (r *Registry) Snapshot(sandboxID string) *Compiled {
	r.mu.RLock()
	p := r.m[sandboxID]
	r.mu.RUnlock()
	if p == nil {
		return nil
	}
	return p.Load()
}

// Set installs c as sandboxID's policy (nil = allow-all) and returns the previous one. Watchers
// run after the swap, in the caller's goroutine.
func (r *Registry) Set(sandboxID string, c *Compiled) (old *Compiled) {
	r.mu.Lock()
	p := r.m[sandboxID]
	if p == nil {
		p = new(atomic.Pointer[Compiled])
		r.m[sandboxID] = p
	}
	old = p.Swap(c)
	ws := r.watchers
	r.mu.Unlock()
	for _, w := range ws {
		w(sandboxID, old, c)
	}
	return old
}

// Delete forgets sandboxID's policy (it becomes allow-all) and runs the watchers.
func (r *Registry) Delete(sandboxID string) {
	r.mu.Lock()
	p := r.m[sandboxID]
	delete(r.m, sandboxID)
	ws := r.watchers
	r.mu.Unlock()
	if p == nil {
		return
	}
	old := p.Load()
	for _, w := range ws {
		w(sandboxID, old, nil)
	}
}

// Watch registers fn to run after every change (Set, Delete) with the old and new snapshot.
// fn must not call Watch.
func (r *Registry) Watch(fn func(sandboxID string, old, new *Compiled)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watchers = append(r.watchers, fn)
}

// Decide implements Policy: the sandbox's snapshot evaluates req.
func (r *Registry) Decide(_ context.Context, req Request) Decision {
	return r.Snapshot(req.SandboxID).Evaluate(req)
}

// Snapshotter is implemented by Policies that hold compiled Specs per sandbox (Registry).
type Snapshotter interface {
	Snapshot(sandboxID string) *Compiled
}

// SnapshotFor returns sandboxID's compiled policy from p when p is a Snapshotter, else nil
// (allow-all for per-request evaluation: a plain Policy has no rules). Callers on the request
// path use it as: policy.SnapshotFor(p, id).Request(host, method, path).
func SnapshotFor(p Policy, sandboxID string) *Compiled {
	if s, ok := p.(Snapshotter); ok {
		return s.Snapshot(sandboxID)
	}
	return nil
}
