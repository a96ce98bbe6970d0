package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

func TestBackups(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC().Truncate(time.Microsecond)
	a := Backup{ID: "a", SandboxID: "s1", Dir: "/workspace", Name: "first", SizeBytes: 10, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	b := Backup{ID: "b", SandboxID: "s2", Dir: "/app", SizeBytes: 20, CreatedAt: now.Add(time.Second), ExpiresAt: now.Add(2 * time.Hour)}
	for _, x := range []Backup{b, a} {
		if err := st.InsertBackup(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.GetBackup(ctx, "a")
	if err != nil || got != a {
		t.Fatalf("GetBackup = %+v, %v; want %+v", got, err, a)
	}
	all, err := st.ListBackups(ctx, "")
	if err != nil || len(all) != 2 || all[0].ID != "a" || all[1].ID != "b" {
		t.Fatalf("ListBackups = %+v, %v", all, err)
	}
	one, err := st.ListBackups(ctx, "s2")
	if err != nil || len(one) != 1 || one[0] != b {
		t.Fatalf("ListBackups(s2) = %+v, %v", one, err)
	}
	if err := st.DeleteBackup(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteBackup(ctx, "a"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := st.GetBackup(ctx, "a"); errdefs.CodeOf(err) != errdefs.CodeBackupNotFound {
		t.Fatalf("GetBackup after delete = %v", err)
	}
}
