package store

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPorts(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	for _, id := range []string{"a", "b"} {
		if _, err := s.Insert(ctx, Sandbox{ID: id, Status: "running"}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.ListPorts(ctx, "a"); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("ListPorts(empty) = %v, %v; want [], nil", got, err)
	}
	p, err := s.InsertPort(ctx, Port{SandboxID: "a", Port: 8080, Token: "tok1", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if p.CreatedAt.IsZero() || p.Token != "tok1" {
		t.Fatalf("InsertPort = %+v", p)
	}
	// Same token on another sandbox is fine; same port on another sandbox is fine.
	if _, err := s.InsertPort(ctx, Port{SandboxID: "b", Port: 8080, Token: "tok1"}); err != nil {
		t.Fatalf("other sandbox: %v", err)
	}

	errTests := []struct {
		name string
		p    Port
		code errdefs.Code
	}{
		{"port again", Port{SandboxID: "a", Port: 8080, Token: "tok2"}, errdefs.CodePortAlreadyExposed},
		{"token reuse", Port{SandboxID: "a", Port: 3001, Token: "tok1"}, errdefs.CodeTokenInUse},
		{"unknown sandbox", Port{SandboxID: "zz", Port: 3001, Token: "x"}, errdefs.CodeSandboxNotFound},
	}
	for _, tt := range errTests {
		if _, err := s.InsertPort(ctx, tt.p); !errdefs.IsCode(err, tt.code) {
			t.Errorf("%s: err = %v; want %s", tt.name, err, tt.code)
		}
	}

	if _, err := s.InsertPort(ctx, Port{SandboxID: "a", Port: 3000, Token: "tok3"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetPort(ctx, "a", 8080)
	if err != nil || got.Token != "tok1" || got.Name != "web" || !got.CreatedAt.Equal(p.CreatedAt) {
		t.Fatalf("GetPort = %+v, %v; want %+v", got, err, p)
	}
	if bt, err := s.PortByToken(ctx, "a", "tok3"); err != nil || bt.Port != 3000 {
		t.Fatalf("PortByToken = %+v, %v; want port 3000", bt, err)
	}
	if _, err := s.PortByToken(ctx, "a", "nope"); !errdefs.IsCode(err, errdefs.CodePortNotExposed) {
		t.Fatalf("PortByToken(nope) err = %v", err)
	}
	list, err := s.ListPorts(ctx, "a")
	if err != nil || len(list) != 2 || list[0].Port != 3000 || list[1].Port != 8080 {
		t.Fatalf("ListPorts = %+v, %v; want ports 3000, 8080", list, err)
	}
	if _, err := s.ListPorts(ctx, "zz"); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Fatalf("ListPorts(unknown) err = %v", err)
	}
	if _, err := s.GetPort(ctx, "a", 9999); !errdefs.IsCode(err, errdefs.CodePortNotExposed) {
		t.Fatalf("GetPort(unexposed) err = %v", err)
	}
	if err := s.DeletePort(ctx, "a", 3000); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePort(ctx, "a", 3000); !errdefs.IsCode(err, errdefs.CodePortNotExposed) {
		t.Fatalf("DeletePort again err = %v", err)
	}
	// The freed token can serve another port.
	if _, err := s.InsertPort(ctx, Port{SandboxID: "a", Port: 4000, Token: "tok3"}); err != nil {
		t.Fatalf("reuse freed token: %v", err)
	}

	// Destroying the sandbox removes its ports (foreign key cascade), not the other sandbox's.
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM exposed_ports WHERE sandbox_id = 'a'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("ports left after Delete = %d, %v; want 0", n, err)
	}
	if _, err := s.Insert(ctx, Sandbox{ID: "a", Status: "running"}); err != nil {
		t.Fatal(err)
	}
	if list, err := s.ListPorts(ctx, "a"); err != nil || len(list) != 0 {
		t.Fatalf("re-created sandbox ports = %+v, %v; want none", list, err)
	}
	if list, err := s.ListPorts(ctx, "b"); err != nil || len(list) != 1 {
		t.Fatalf("other sandbox ports = %+v, %v; want 1", list, err)
	}
}

// TestPortsSurviveReopen checks the rows are on disk and the schema migration is idempotent.
func TestPortsSurviveReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hutch.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Insert(ctx, Sandbox{ID: "a", Status: "running"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertPort(ctx, Port{SandboxID: "a", Port: 8080, Token: "t"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if p, err := s.GetPort(ctx, "a", 8080); err != nil || p.Token != "t" {
		t.Fatalf("after reopen GetPort = %+v, %v", p, err)
	}
}

// TestInsertPortConcurrent: many concurrent exposes of one port with different tokens leave
// exactly one winner; the rest see PORT_ALREADY_EXPOSED.
func TestInsertPortConcurrent(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if _, err := s.Insert(ctx, Sandbox{ID: "a", Status: "running"}); err != nil {
		t.Fatal(err)
	}
	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.InsertPort(ctx, Port{SandboxID: "a", Port: 5000, Token: "t" + string(rune('a'+i))})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errdefs.IsCode(err, errdefs.CodePortAlreadyExposed):
			t.Errorf("unexpected err %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d inserts succeeded; want 1", ok)
	}
}
