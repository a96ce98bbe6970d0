package server

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/store"
)

// TestStoppedStartFailsUncoded: a request to a stopped sandbox whose start fails without a
// code of its own (its status cannot be written) is 503 UNAVAILABLE, saying the sandbox is
// stopped and could not be started, not that it went down while the request ran.
func TestStoppedStartFailsUncoded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "hutch.db")
	st, err := store.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Insert(ctx, store.Sandbox{ID: "sb1", Status: "stopped", InstanceType: "lite"}); err != nil {
		t.Fatal(err)
	}
	// Every write of a record fails, as on a store whose disk went bad; reads still work.
	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TRIGGER fail_writes BEFORE UPDATE ON sandboxes BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	srv := storeServer(t, dir, st)

	code, m := call(t, srv, "POST", "/v1/sandboxes/sb1/execute", `{"command":"true"}`)
	msg, _ := m["message"].(string)
	if code != 503 || m["code"] != "UNAVAILABLE" {
		t.Fatalf("execute on a stopped sandbox that cannot start: %d %v; want 503 UNAVAILABLE", code, m)
	}
	if strings.Contains(msg, "while the request ran") || !strings.Contains(msg, `"sb1" is stopped and could not be started`) {
		t.Fatalf("message %q; want it to say the stopped sandbox could not be started", msg)
	}
	if ctxm, _ := m["context"].(map[string]any); ctxm["status"] != string(sandbox.StatusStopped) {
		t.Fatalf("context %v; want status stopped", m["context"])
	}
}
