package preview

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/store"
)

// testStore opens a real SQLite store in a temp dir with the given sandboxes recorded.
func testStore(t testing.TB, ids ...string) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, id := range ids {
		if _, err := st.Insert(ctx, store.Sandbox{ID: id, Status: "running"}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func TestServiceExpose(t *testing.T) {
	ctx := context.Background()
	st := testStore(t, "sb1", "sb2")
	svc := NewService(Config{Domain: "localhost", PublicPort: 7412, ReservedPorts: []int{7412}}, st, nil)

	p, err := svc.Expose(ctx, "sb1", ExposeRequest{Port: 8080, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Token) != 16 || !ValidToken(p.Token) || p.Name != "web" || p.Port != 8080 || p.ExposedAt.IsZero() {
		t.Fatalf("Expose = %+v", p)
	}
	if want := "http://8080-sb1-" + p.Token + ".localhost:7412/"; p.URL != want {
		t.Fatalf("URL = %q; want %q", p.URL, want)
	}

	// Idempotent: no token, the same token, the same name or none.
	for _, req := range []ExposeRequest{{Port: 8080}, {Port: 8080, Token: p.Token}, {Port: 8080, Name: "web", Token: p.Token}} {
		again, err := svc.Expose(ctx, "sb1", req)
		if err != nil || again != p {
			t.Fatalf("Expose again %+v = %+v, %v; want %+v", req, again, err, p)
		}
	}

	custom, err := svc.Expose(ctx, "sb1", ExposeRequest{Port: 3000, Token: "my_token"})
	if err != nil || custom.Token != "my_token" || custom.URL != "http://3000-sb1-my_token.localhost:7412/" || custom.Name != "" {
		t.Fatalf("Expose custom = %+v, %v", custom, err)
	}
	// The same custom token is fine in another sandbox.
	if _, err := svc.Expose(ctx, "sb2", ExposeRequest{Port: 3000, Token: "my_token"}); err != nil {
		t.Fatalf("other sandbox, same token: %v", err)
	}

	errTests := []struct {
		name string
		id   string
		req  ExposeRequest
		code errdefs.Code
	}{
		{"port 80", "sb1", ExposeRequest{Port: 80}, errdefs.CodeInvalidPort},
		{"port 0", "sb1", ExposeRequest{}, errdefs.CodeInvalidPort},
		{"port 70000", "sb1", ExposeRequest{Port: 70000}, errdefs.CodeInvalidPort},
		{"reserved", "sb1", ExposeRequest{Port: 7412}, errdefs.CodeInvalidPort},
		{"token hyphen", "sb1", ExposeRequest{Port: 4000, Token: "a-b"}, errdefs.CodeBadPortToken},
		{"token upper", "sb1", ExposeRequest{Port: 4000, Token: "ABCDEFGHIJ"}, errdefs.CodeBadPortToken},
		{"token long", "sb1", ExposeRequest{Port: 4000, Token: strings.Repeat("a", 17)}, errdefs.CodeBadPortToken},
		{"token short", "sb1", ExposeRequest{Port: 4000, Token: "abc"}, errdefs.CodeBadPortToken},
		{"name long", "sb1", ExposeRequest{Port: 4000, Name: strings.Repeat("n", 64)}, errdefs.CodeInvalidArgument},
		{"name control", "sb1", ExposeRequest{Port: 4000, Name: "a\nb"}, errdefs.CodeInvalidArgument},
		{"token in use", "sb1", ExposeRequest{Port: 4000, Token: "my_token"}, errdefs.CodeTokenInUse},
		{"other token", "sb1", ExposeRequest{Port: 8080, Token: "other_token"}, errdefs.CodePortAlreadyExposed},
		{"other name", "sb1", ExposeRequest{Port: 8080, Name: "api"}, errdefs.CodePortAlreadyExposed},
		{"unknown sandbox", "nope", ExposeRequest{Port: 4000}, errdefs.CodeSandboxNotFound},
		{"bad id", "Bad_ID", ExposeRequest{Port: 4000}, errdefs.CodeInvalidSandboxID},
	}
	for _, tt := range errTests {
		if _, err := svc.Expose(ctx, tt.id, tt.req); !errdefs.IsCode(err, tt.code) {
			t.Errorf("%s: err = %v; want %s", tt.name, err, tt.code)
		}
	}
	if _, err := svc.Expose(ctx, "sb1", ExposeRequest{Port: 4000, Name: strings.Repeat("é", 63)}); err != nil {
		t.Errorf("63-character name: %v", err)
	}

	list, err := svc.List(ctx, "sb1")
	if err != nil || len(list) != 3 || list[0] != custom || list[1].Port != 4000 || list[2] != p {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if _, err := svc.List(ctx, "nope"); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Fatalf("List(unknown) err = %v", err)
	}

	if err := svc.Unexpose(ctx, "sb1", 3000); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		port int
		code errdefs.Code
	}{{3000, errdefs.CodePortNotExposed}, {9999, errdefs.CodePortNotExposed}, {0, errdefs.CodeInvalidPort}, {65536, errdefs.CodeInvalidPort}} {
		if err := svc.Unexpose(ctx, "sb1", tt.port); !errdefs.IsCode(err, tt.code) {
			t.Errorf("Unexpose(%d) err = %v; want %s", tt.port, err, tt.code)
		}
	}
	// The freed token serves another port now.
	if _, err := svc.Expose(ctx, "sb1", ExposeRequest{Port: 5000, Token: "my_token"}); err != nil {
		t.Fatalf("reuse unexposed token: %v", err)
	}
}

// TestServiceExposeConcurrent: concurrent exposes of one port without a token all get the one
// stored token.
func TestServiceExposeConcurrent(t *testing.T) {
	ctx := context.Background()
	svc := NewService(Config{Domain: "localhost"}, testStore(t, "sb1"), nil)
	const n = 30
	got := make([]Port, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = svc.Expose(ctx, "sb1", ExposeRequest{Port: 8080})
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != got[0] {
			t.Fatalf("Expose #%d = %+v, %v; want %+v", i, got[i], errs[i], got[0])
		}
	}
}
