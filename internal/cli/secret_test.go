package cli

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/secret"
	"github.com/hutchdev/hutch/internal/server"
	"github.com/hutchdev/hutch/internal/store"
)

// realSecrets is the real secret store with no policies using anything.
type realSecrets struct{ *secret.Store }

func (realSecrets) UsedBy(context.Context) (map[string][]string, error) { return nil, nil }

func TestSecretCommands(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	box, err := secret.LoadOrCreateKey(filepath.Join(dir, "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := secret.NewStore(st, box)
	srv := httptest.NewServer(server.New(slog.New(slog.DiscardHandler), server.Deps{Token: "tok", Version: "test", Secrets: realSecrets{secrets}}))
	defer srv.Close()

	const value = "token-from-stdin-0123456789"
	if r := run(t, srv.URL, value+"\n", "secret", "set", "GH_TOKEN"); r.code != 0 || strings.Contains(r.stdout+r.stderr, value) {
		t.Fatalf("set: %+v", r)
	}
	if v, _ := secrets.Value(ctx, "GH_TOKEN"); string(v) != value {
		t.Fatalf("stored %q (trailing newline must be dropped)", v)
	}
	if r := run(t, srv.URL, "", "secret", "list"); r.code != 0 || !strings.Contains(r.stdout, "GH_TOKEN") || strings.Contains(r.stdout, value) {
		t.Fatalf("list: %+v", r)
	}
	if r := run(t, srv.URL, "", "secret", "list", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"name": "GH_TOKEN"`) {
		t.Fatalf("list --json: %+v", r)
	}
	if r := run(t, srv.URL, "", "secret", "set", "BAD NAME"); r.code == 0 || !strings.Contains(r.stderr, "INVALID_SECRET") {
		t.Fatalf("bad name: %+v", r)
	}
	if r := run(t, srv.URL, "", "secret", "set", "X", "--from-env", "NOPE_UNSET"); r.code == 0 {
		t.Fatalf("unset env accepted: %+v", r)
	}
	if r := run(t, srv.URL, "", "secret", "rm", "GH_TOKEN"); r.code != 0 {
		t.Fatalf("rm: %+v", r)
	}
	if r := run(t, srv.URL, "", "secret", "rm", "GH_TOKEN"); r.code == 0 || !strings.Contains(r.stderr, "SECRET_NOT_FOUND") {
		t.Fatalf("rm again: %+v", r)
	}
}
