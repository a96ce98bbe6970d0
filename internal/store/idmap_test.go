package store

import (
	"context"
	"path/filepath"
	"testing"
)

func TestIDBaseAllocation(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	insert := func(id string, userns bool) Sandbox {
		t.Helper()
		sb, err := s.Insert(ctx, Sandbox{ID: id, Image: "img", ImageName: "default", InstanceType: "lite", Status: "creating", UserNS: userns})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.IDBase != sb.IDBase || got.UserNS != userns {
			t.Fatalf("%s: stored base %d userns %v, Insert said %d", id, got.IDBase, got.UserNS, sb.IDBase)
		}
		return got
	}
	steps := []struct {
		id     string
		userns bool
		del    string // deleted before the insert
		want   uint32
	}{
		{id: "a", userns: true, want: FirstIDBase},
		{id: "plain", userns: false, want: 0},
		{id: "b", userns: true, want: FirstIDBase + IDRangeSize},
		{id: "c", userns: true, want: FirstIDBase + 2*IDRangeSize},
		{id: "d", userns: true, del: "a", want: FirstIDBase}, // a's range is free again
		{id: "e", userns: true, want: FirstIDBase + 3*IDRangeSize},
		{id: "f", userns: true, del: "c", want: FirstIDBase + 2*IDRangeSize},
	}
	for _, st := range steps {
		if st.del != "" {
			if err := s.Delete(ctx, st.del); err != nil {
				t.Fatal(err)
			}
		}
		if got := insert(st.id, st.userns); got.IDBase != st.want {
			t.Fatalf("%s: base %d, want %d", st.id, got.IDBase, st.want)
		}
	}
	// Two sandboxes never share a base (the unique index backs the allocator).
	if _, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET id_base = ? WHERE id = 'e'`, FirstIDBase); err == nil {
		t.Fatal("duplicate id_base accepted")
	}
}

func TestIDBaseExhausted(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Insert(ctx, Sandbox{ID: "last", Image: "i", ImageName: "d", InstanceType: "lite", Status: "creating", UserNS: true}); err != nil {
		t.Fatal(err)
	}
	// Fill the gap below the last range artificially: move "last" to the top and claim all
	// bases in between with one recursive insert.
	if _, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET id_base = ? WHERE id = 'last'`, MaxIDBase); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `WITH RECURSIVE n(b, k) AS (SELECT ?, 0 UNION ALL SELECT b + ?, k + 1 FROM n WHERE b + ? < ?)
		INSERT INTO sandboxes (id, image, image_name, instance_type, env_json, status, net_slot, created_at, updated_at, id_base)
		SELECT 'r' || k, 'i', 'd', 'lite', '{}', 'stopped', 100000 + k, 0, 0, b FROM n`,
		FirstIDBase, IDRangeSize, IDRangeSize, MaxIDBase); err != nil {
		t.Fatal(err)
	}
	_, err = s.Insert(ctx, Sandbox{ID: "one-more", Image: "i", ImageName: "d", InstanceType: "lite", Status: "creating", UserNS: true})
	if err == nil {
		t.Fatal("insert past the last range succeeded")
	}
	// Without a user namespace a sandbox still fits.
	if _, err := s.Insert(ctx, Sandbox{ID: "plain", Image: "i", ImageName: "d", InstanceType: "lite", Status: "creating"}); err != nil {
		t.Fatal(err)
	}
}
