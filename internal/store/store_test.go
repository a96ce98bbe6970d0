package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

func TestStoreLifecycle(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hutch.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Insert(ctx, Sandbox{ID: "a", Image: "img", ImageName: "default", InstanceType: "lite", Status: "creating", EnvVars: map[string]string{"K": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Insert(ctx, Sandbox{ID: "b", Image: "img", ImageName: "default", InstanceType: "lite", Status: "creating"})
	if err != nil {
		t.Fatal(err)
	}
	if a.NetSlot != 0 || b.NetSlot != 1 {
		t.Fatalf("slots = %d, %d; want 0, 1", a.NetSlot, b.NetSlot)
	}
	if _, err := s.Insert(ctx, Sandbox{ID: "a", Status: "creating"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("duplicate insert: err = %v; want ErrAlreadyExists", err)
	}
	if ok, _, err := s.SetStatus(ctx, "a", StatusChange{To: "running", From: []string{"creating"}, Started: true}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	// The freed slot is reused.
	c, err := s.Insert(ctx, Sandbox{ID: "c", Status: "creating"})
	if err != nil {
		t.Fatal(err)
	}
	if c.NetSlot != 0 {
		t.Fatalf("reused slot = %d; want 0", c.NetSlot)
	}
	s.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %o; want 0600 (records hold env vars)", p, st.Mode().Perm())
		}
	}

	// Reopen: data survives.
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Get(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if got.InstanceType != "lite" || got.Status != "creating" {
		t.Fatalf("Get(b) = %+v", got)
	}
	if _, err := s.Get(ctx, "a"); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Fatalf("Get(a) err = %v; want SANDBOX_NOT_FOUND", err)
	}
	if _, _, err := s.SetStatus(ctx, "zzz", StatusChange{To: "running", From: []string{"creating"}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("SetStatus(unknown) err = %v; want ErrNotFound", err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %v, %v; want 2 records", list, err)
	}
}

func TestStoreConcurrentInsertsGetDistinctSlots(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	slots := make(chan int, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := s.Insert(ctx, Sandbox{ID: string(rune('a' + i)), Status: "creating"})
			if err != nil {
				t.Error(err)
				return
			}
			slots <- sb.NetSlot
		}()
	}
	wg.Wait()
	close(slots)
	seen := map[int]bool{}
	for sl := range slots {
		if seen[sl] {
			t.Fatalf("slot %d given twice", sl)
		}
		seen[sl] = true
	}
}

// TestSetStatusOnlyFrom checks the conditional write: a status is written only while the
// recorded one is in From, the refusal reports the recorded status and changes nothing, and
// Started stamps StartedAt.
func TestSetStatusOnlyFrom(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Insert(ctx, Sandbox{ID: "a", Status: "stopped", LastError: "old"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		ch      StatusChange
		written bool
		want    Sandbox // Status, LastError; StartedAt set or not
	}{
		{"not from the recorded status", StatusChange{To: "running", From: []string{"starting", "creating"}, Started: true}, false, Sandbox{Status: "stopped", LastError: "old"}},
		{"no From never writes", StatusChange{To: "running", Started: true}, false, Sandbox{Status: "stopped", LastError: "old"}},
		{"from the recorded status", StatusChange{To: "starting", From: []string{"sleeping", "stopped"}}, true, Sandbox{Status: "starting"}},
		{"with an error", StatusChange{To: "error", LastError: "boom", From: []string{"starting"}}, true, Sandbox{Status: "error", LastError: "boom"}},
		{"started", StatusChange{To: "running", From: []string{"error"}, Started: true}, true, Sandbox{Status: "running", StartedAt: time.Unix(1, 0)}},
	}
	for _, tt := range tests {
		written, cur, err := s.SetStatus(ctx, "a", tt.ch)
		if err != nil || written != tt.written {
			t.Fatalf("%s: SetStatus = %v, %q, %v; want written %v", tt.name, written, cur, err, tt.written)
		}
		if !written && cur != tt.want.Status {
			t.Errorf("%s: current = %q; want %q", tt.name, cur, tt.want.Status)
		}
		got, err := s.Get(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != tt.want.Status || got.LastError != tt.want.LastError || got.StartedAt.IsZero() != tt.want.StartedAt.IsZero() {
			t.Errorf("%s: record = %q %q started %v; want %q %q started %v", tt.name, got.Status, got.LastError, got.StartedAt,
				tt.want.Status, tt.want.LastError, !tt.want.StartedAt.IsZero())
		}
	}
}
