package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestStoreLifecycle(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hutch.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Insert(ctx, Sandbox{ID: "a", Image: "img", ImageName: "default", InstanceType: "lite", Status: StatusCreating, EnvVars: map[string]string{"K": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Insert(ctx, Sandbox{ID: "b", Image: "img", ImageName: "default", InstanceType: "lite", Status: StatusCreating})
	if err != nil {
		t.Fatal(err)
	}
	if a.NetSlot != 0 || b.NetSlot != 1 {
		t.Fatalf("slots = %d, %d; want 0, 1", a.NetSlot, b.NetSlot)
	}
	if _, err := s.Insert(ctx, Sandbox{ID: "a", Status: StatusCreating}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("duplicate insert: err = %v; want ErrAlreadyExists", err)
	}
	if err := s.SetStatus(ctx, "a", StatusRunning, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	// The freed slot is reused.
	c, err := s.Insert(ctx, Sandbox{ID: "c", Status: StatusCreating})
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
	if got.InstanceType != "lite" || got.Status != StatusCreating {
		t.Fatalf("Get(b) = %+v", got)
	}
	if _, err := s.Get(ctx, "a"); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Fatalf("Get(a) err = %v; want SANDBOX_NOT_FOUND", err)
	}
	if err := s.SetStatus(ctx, "zzz", StatusRunning, ""); !errors.Is(err, errdefs.ErrNotFound) {
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
			sb, err := s.Insert(ctx, Sandbox{ID: string(rune('a' + i)), Status: StatusCreating})
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
