package backup

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent"
	"github.com/hutchdev/hutch/internal/agentclient"
	"github.com/hutchdev/hutch/internal/blob"
	"github.com/hutchdev/hutch/internal/sandboxid"
	"github.com/hutchdev/hutch/internal/store"
	"github.com/hutchdev/hutch/internal/testutil"
)

// agents serves real agents (in this process, on unix sockets) as "sandboxes".
type agents map[string]http.RoundTripper

func (a agents) Ensure(_ context.Context, id sandboxid.ID) (*agentclient.Client, error) {
	if tr, ok := a[id.String()]; ok {
		return agentclient.New(id.String(), tr), nil
	}
	return nil, errdefs.Newf(errdefs.CodeSandboxNotFound, "sandbox %q not found", id)
}

// startAgent runs a real agent server and returns a transport to it.
func startAgent(t *testing.T) http.RoundTripper {
	t.Helper()
	base := t.TempDir()
	sockDir, err := os.MkdirTemp("", "hbak")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	srv, err := agent.New(agent.Config{Workdir: filepath.Join(base, "ws"), StateDir: filepath.Join(base, "state"),
		Env: os.Environ(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := agent.Listen(filepath.Join(sockDir, "a.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	sock := filepath.Join(sockDir, "a.sock")
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		cancel()
		<-done
	})
	return tr
}

type fixture struct {
	svc   *Service
	blobs *blob.Local
	st    *store.Store
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	blobs, err := blob.NewLocal(filepath.Join(t.TempDir(), "blobs"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg.Blobs, cfg.Store = blobs, st
	if cfg.Agents == nil {
		cfg.Agents = agents{"a": startAgent(t), "b": startAgent(t)}
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	return &fixture{svc: New(cfg), blobs: blobs, st: st}
}

func (f *fixture) keys(t *testing.T) []string {
	t.Helper()
	infos, err := f.blobs.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range infos {
		out = append(out, in.Key)
	}
	return out
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func ttl(s float64) *float64 { return &s }

// tmpDir returns a directory under /tmp (an allowed root) for the test.
func tmpDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "hutch-backup-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestCreateRestoreDelete(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Config{})
	dir := filepath.Join(tmpDir(t), "proj")
	write(t, filepath.Join(dir, "src/main.go"), "package main\n")
	write(t, filepath.Join(dir, "node_modules/x/index.js"), "module.exports = 1\n")
	write(t, filepath.Join(dir, "debug.log"), "noise")
	write(t, filepath.Join(dir, "big"), strings.Repeat("compressible ", 1<<18))

	b, err := f.svc.Create(ctx, "a", CreateRequest{Dir: dir + "/", Name: "first", Excludes: []string{"*.log"}})
	if err != nil {
		t.Fatal(err)
	}
	if !validID(b.ID) || b.Dir != dir || b.SandboxID != "a" || b.Name != "first" || b.SizeBytes <= 0 ||
		b.ExpiresAt.Sub(b.CreatedAt) != DefaultTTL {
		t.Fatalf("backup = %+v", b)
	}
	if b.SizeBytes > 1<<20 {
		t.Errorf("archive is %d bytes: not compressed?", b.SizeBytes)
	}
	if got := strings.Join(f.keys(t), " "); got != "backups/"+b.ID+".json backups/"+b.ID+".tar.zst" {
		t.Errorf("blobs = %s", got)
	}

	// Changes after the backup are gone after a restore into the same dir.
	write(t, filepath.Join(dir, "src/main.go"), "changed")
	write(t, filepath.Join(dir, "new-file"), "new")
	os.RemoveAll(filepath.Join(dir, "node_modules"))
	got, _, err := f.svc.Restore(ctx, "a", b.ID, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Dir != dir || got.ID != b.ID {
		t.Errorf("restore = %+v", got)
	}
	for p, want := range map[string]string{
		"src/main.go":             "package main\n",
		"node_modules/x/index.js": "module.exports = 1\n",
		"new-file":                "<open " + filepath.Join(dir, "new-file") + ": no such file or directory>",
		"debug.log":               "<open " + filepath.Join(dir, "debug.log") + ": no such file or directory>",
	} {
		if g := read(t, filepath.Join(dir, p)); g != want {
			t.Errorf("%s = %q, want %q", p, g, want)
		}
	}

	// Into another dir of another sandbox, found through the meta blob only (another host's
	// handle: no row here).
	if err := f.st.DeleteBackup(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(tmpDir(t), "elsewhere/copy")
	if _, _, err := f.svc.Restore(ctx, "b", b.ID, other, ""); err != nil {
		t.Fatal(err)
	}
	if g := read(t, filepath.Join(other, "src/main.go")); g != "package main\n" {
		t.Errorf("copy: main.go = %q", g)
	}
	if err := f.st.InsertBackup(ctx, b.row()); err != nil {
		t.Fatal(err)
	}

	list, err := f.svc.List(ctx, "a")
	if err != nil || len(list) != 1 || list[0].ID != b.ID {
		t.Fatalf("List(a) = %+v, %v", list, err)
	}
	if list, _ := f.svc.List(ctx, "b"); len(list) != 0 {
		t.Errorf("List(b) = %+v", list)
	}
	if err := f.svc.Delete(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if keys := f.keys(t); len(keys) != 0 {
		t.Errorf("blobs after delete: %v", keys)
	}
	for _, err := range []error{
		f.svc.Delete(ctx, b.ID),
		func() error { _, err := f.svc.Get(ctx, b.ID); return err }(),
		func() error { _, _, err := f.svc.Restore(ctx, "a", b.ID, "", ""); return err }(),
	} {
		if errdefs.CodeOf(err) != errdefs.CodeBackupNotFound {
			t.Errorf("after delete: %v; want BACKUP_NOT_FOUND", err)
		}
	}
}

func TestValidation(t *testing.T) {
	ctx := context.Background()
	clock := testutil.NewClock(time.Now())
	f := newFixture(t, Config{Now: clock.Now})
	dir := tmpDir(t)
	for _, c := range []struct {
		name string
		req  CreateRequest
		code errdefs.Code
	}{
		{"relative", CreateRequest{Dir: "workspace/x"}, errdefs.CodeInvalidBackupConfig},
		{"empty", CreateRequest{}, errdefs.CodeInvalidBackupConfig},
		{"dotdot", CreateRequest{Dir: "/workspace/../etc"}, errdefs.CodeInvalidBackupConfig},
		{"outside roots", CreateRequest{Dir: "/etc"}, errdefs.CodeInvalidBackupConfig},
		{"root prefix only", CreateRequest{Dir: "/tmpfoo"}, errdefs.CodeInvalidBackupConfig},
		{"nul", CreateRequest{Dir: "/tmp/a\x00b"}, errdefs.CodeInvalidBackupConfig},
		{"ttl 0", CreateRequest{Dir: dir, TTL: ttl(0)}, errdefs.CodeInvalidBackupConfig},
		{"ttl negative", CreateRequest{Dir: dir, TTL: ttl(-5)}, errdefs.CodeInvalidBackupConfig},
		{"ttl below 1 s", CreateRequest{Dir: dir, TTL: ttl(0.5)}, errdefs.CodeInvalidBackupConfig},
		{"ttl 1e10", CreateRequest{Dir: dir, TTL: ttl(1e10)}, errdefs.CodeInvalidBackupConfig},
		{"ttl above 10 years", CreateRequest{Dir: dir, TTL: ttl(MaxTTL.Seconds() + 1)}, errdefs.CodeInvalidBackupConfig},
		{"ttl 1e300", CreateRequest{Dir: dir, TTL: ttl(1e300)}, errdefs.CodeInvalidBackupConfig},
		{"long name", CreateRequest{Dir: dir, Name: strings.Repeat("n", 257)}, errdefs.CodeInvalidBackupConfig},
		{"control char", CreateRequest{Dir: dir, Name: "a\nb"}, errdefs.CodeInvalidBackupConfig},
		{"bad exclude", CreateRequest{Dir: dir, Excludes: []string{"[x"}}, errdefs.CodeInvalidBackupConfig},
		{"missing dir", CreateRequest{Dir: filepath.Join(dir, "missing")}, errdefs.CodeFileNotFound},
	} {
		if _, err := f.svc.Create(ctx, "a", c.req); errdefs.CodeOf(err) != c.code {
			t.Errorf("%s: Create = %v; want %s", c.name, err, c.code)
		}
	}
	if _, err := f.svc.Create(ctx, "nope", CreateRequest{Dir: dir}); errdefs.CodeOf(err) != errdefs.CodeSandboxNotFound {
		t.Errorf("unknown sandbox: %v", err)
	}
	if _, err := f.svc.Create(ctx, "a", CreateRequest{Dir: dir, Name: strings.Repeat("é", 256)}); err != nil {
		t.Errorf("a 256-character name: %v", err)
	}
	for _, id := range []string{"00000000-0000-4000-8000-000000000000", "not-a-uuid", "../../etc/passwd"} {
		if _, _, err := f.svc.Restore(ctx, "a", id, "", ""); errdefs.CodeOf(err) != errdefs.CodeBackupNotFound {
			t.Errorf("Restore(%q) = %v; want BACKUP_NOT_FOUND", id, err)
		}
	}
	long, err := f.svc.Create(ctx, "a", CreateRequest{Dir: dir, TTL: ttl(MaxTTL.Seconds())})
	if err != nil {
		t.Fatal(err)
	}
	if got := long.ExpiresAt.Sub(long.CreatedAt); got != MaxTTL {
		t.Errorf("ttl of 10 years: expiresAt-createdAt = %v (expiresAt %v)", got, long.ExpiresAt)
	}
	if err := f.svc.Delete(ctx, long.ID); err != nil {
		t.Fatal(err)
	}
	b, err := f.svc.Create(ctx, "a", CreateRequest{Dir: dir, TTL: ttl(1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.Restore(ctx, "a", b.ID, "/etc", ""); errdefs.CodeOf(err) != errdefs.CodeInvalidBackupConfig {
		t.Errorf("restore into /etc: %v", err)
	}
	clock.Advance(1500 * time.Millisecond)
	if _, _, err := f.svc.Restore(ctx, "a", b.ID, "", ""); errdefs.CodeOf(err) != errdefs.CodeBackupExpired {
		t.Errorf("expired: %v; want BACKUP_EXPIRED", err)
	}
	st, err := f.svc.GC(ctx)
	if err != nil || st.Expired != 1 {
		t.Errorf("GC = %+v, %v", st, err)
	}
	if _, err := f.svc.Get(ctx, b.ID); errdefs.CodeOf(err) != errdefs.CodeBackupNotFound {
		t.Errorf("after GC: %v", err)
	}
}

func TestGCOrphansAndStaleRows(t *testing.T) {
	ctx := context.Background()
	clock := testutil.NewClock(time.Now())
	f := newFixture(t, Config{OrphanAge: time.Hour, Now: clock.Now})
	orphan := newID()
	if _, err := f.blobs.Put(ctx, archiveKey(orphan), strings.NewReader("half"), 4); err != nil {
		t.Fatal(err)
	}
	dir := tmpDir(t)
	write(t, filepath.Join(dir, "f"), "x")
	kept, err := f.svc.Create(ctx, "a", CreateRequest{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	stale := Backup{ID: newID(), SandboxID: "a", Dir: dir, CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if err := f.st.InsertBackup(ctx, stale.row()); err != nil {
		t.Fatal(err)
	}
	if st, err := f.svc.GC(ctx); err != nil || st.Orphans != 0 || st.Stale != 1 {
		t.Errorf("first GC (orphan too young) = %+v, %v", st, err)
	}
	clock.Advance(2 * time.Hour)
	if st, err := f.svc.GC(ctx); err != nil || st.Orphans != 1 {
		t.Errorf("second GC = %+v, %v", st, err)
	}
	want := fmt.Sprintf("backups/%s.json backups/%s.tar.zst", kept.ID, kept.ID)
	if got := strings.Join(f.keys(t), " "); got != want {
		t.Errorf("blobs = %s; want %s", got, want)
	}
}

// A Create cut off part way (its context ends during the stream) leaves no backup: no row, no
// meta, no archive.
func TestCreateCancelledLeavesNothing(t *testing.T) {
	f := newFixture(t, Config{})
	dir := tmpDir(t)
	for i := 0; i < 64; i++ {
		// Incompressible, so the stream takes a while.
		b := make([]byte, 1<<20)
		for j := range b {
			b[j] = byte((i*7919 + j*31) ^ (j >> 3))
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(30 * time.Millisecond)
		cancel()
	}()
	_, err := f.svc.Create(ctx, "a", CreateRequest{Dir: dir})
	if err == nil {
		t.Skip("the backup finished before the cancel; nothing to check")
	}
	if keys := f.keys(t); len(keys) != 0 {
		t.Errorf("blobs after a cancelled create: %v", keys)
	}
	if rows, _ := f.st.ListBackups(context.Background(), ""); len(rows) != 0 {
		t.Errorf("rows after a cancelled create: %+v", rows)
	}
	// A retry works.
	if _, err := f.svc.Create(context.Background(), "a", CreateRequest{Dir: dir}); err != nil {
		t.Errorf("retry: %v", err)
	}
}
