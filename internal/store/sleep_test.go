package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

func TestSleepSettings(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := s.Insert(ctx, Sandbox{ID: "a", Image: "img", ImageName: "default", InstanceType: "lite", Status: "creating"})
	if err != nil {
		t.Fatal(err)
	}
	if a.SleepAfter != DefaultSleepAfter || a.KeepAlive {
		t.Fatalf("Insert defaults = %s %v; want %s false", a.SleepAfter, a.KeepAlive, DefaultSleepAfter)
	}
	if _, err := s.Insert(ctx, Sandbox{ID: "b", Image: "img", Status: "creating", SleepAfter: 3 * time.Second, KeepAlive: true}); err != nil {
		t.Fatal(err)
	}
	b, err := s.Get(ctx, "b")
	if err != nil || b.SleepAfter != 3*time.Second || !b.KeepAlive {
		t.Fatalf("Get(b) = %+v, %v; want 3s keepAlive", b, err)
	}
	if err := s.SetSleepSettings(ctx, "b", 1500*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	if b, _ = s.Get(ctx, "b"); b.SleepAfter != 1500*time.Millisecond || b.KeepAlive {
		t.Fatalf("after SetSleepSettings: %s %v", b.SleepAfter, b.KeepAlive)
	}
	if err := s.SetSleepSettings(ctx, "nope", time.Second, false); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	if err := s.SetSleepSettings(ctx, "b", 0, false); !errdefs.IsCode(err, errdefs.CodeInvalidArgument) {
		t.Fatalf("zero sleepAfter: %v", err)
	}
	from := "creating"
	for _, st := range []string{"starting", "stopping", "sleeping"} {
		if ok, _, err := s.SetStatus(ctx, "b", StatusChange{To: st, From: []string{from}}); err != nil || !ok {
			t.Fatal(ok, err)
		}
		from = st
		if b, _ = s.Get(ctx, "b"); b.Status != st {
			t.Fatalf("status = %s; want %s", b.Status, st)
		}
	}
}

// TestSleepMigrationKeepsRows opens a database made before the sleep columns existed: its rows
// get the default sleepAfter and keepAlive false.
func TestSleepMigrationKeepsRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hutch.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO sandboxes (id, image, image_name, instance_type, env_json, status, net_slot, created_at, updated_at)
		VALUES ('old', 'img', 'default', 'lite', '{}', 'stopped', 0, 1, 1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old, err := s.Get(ctx, "old")
	if err != nil || old.SleepAfter != DefaultSleepAfter || old.KeepAlive || old.Status != "stopped" {
		t.Fatalf("Get(old) = %+v, %v", old, err)
	}
}

func TestSleepSnapshotFields(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Insert(ctx, Sandbox{ID: "a", Image: "img", Status: "creating", SnapshotOnSleep: true}); err != nil {
		t.Fatal(err)
	}
	if a, err := s.Get(ctx, "a"); err != nil || !a.SnapshotOnSleep || a.LastSnapshot != "" {
		t.Fatalf("Get(a) = %+v, %v; want snapshotOnSleep", a, err)
	}
	if err := s.SetSleepSnapshot(ctx, "a", "sha256-1", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSleepSnapshot(ctx, "a", "", "disk full"); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Get(ctx, "a"); a.LastSnapshot != "sha256-1" || a.LastSnapshotError != "disk full" {
		t.Fatalf("after failure: %q %q", a.LastSnapshot, a.LastSnapshotError)
	}
	if err := s.SetSleepSnapshot(ctx, "a", "sha256-2", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSnapshotOnSleep(ctx, "a", false); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Get(ctx, "a"); a.LastSnapshot != "sha256-2" || a.LastSnapshotError != "" || a.SnapshotOnSleep {
		t.Fatalf("after success: %+v", a)
	}
	for _, err := range []error{s.SetSnapshotOnSleep(ctx, "nope", true), s.SetSleepSnapshot(ctx, "nope", "x", "")} {
		if !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
			t.Fatalf("unknown sandbox: %v", err)
		}
	}
}
