package store

import (
	"context"
	"testing"

	"github.com/hutchdev/hutch/errdefs"
)

func TestEgressPolicies(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if _, err := s.Insert(ctx, Sandbox{ID: "sb1", Status: "running"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutEgressPolicy(ctx, "nope", `{}`); !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) {
		t.Fatalf("Put unknown sandbox = %v", err)
	}
	if _, err := s.GetEgressPolicy(ctx, "sb1"); !errdefs.IsCode(err, errdefs.CodeNotFound) {
		t.Fatalf("Get none = %v", err)
	}
	for _, js := range []string{`{"mode":"deny-all"}`, `{"mode":"allowlist","allow":["a.test"]}`} {
		if err := s.PutEgressPolicy(ctx, "sb1", js); err != nil {
			t.Fatal(err)
		}
		p, err := s.GetEgressPolicy(ctx, "sb1")
		if err != nil || p.SpecJSON != js || p.UpdatedAt.IsZero() {
			t.Fatalf("Get = %+v %v", p, err)
		}
	}
	list, err := s.ListEgressPolicies(ctx)
	if err != nil || len(list) != 1 || list[0].SandboxID != "sb1" {
		t.Fatalf("List = %+v %v", list, err)
	}
	// Deleted with the sandbox.
	if err := s.Delete(ctx, "sb1"); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.ListEgressPolicies(ctx); len(list) != 0 {
		t.Errorf("policy outlived its sandbox: %+v", list)
	}
	if err := s.DeleteEgressPolicy(ctx, "sb1"); err != nil {
		t.Error(err)
	}
}
