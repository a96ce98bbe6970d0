package v1_test

import (
	"context"
	"slices"
	"testing"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/internal/openapitest"
)

// TestRoutesMatchOpenAPI holds Routes and api/openapi.yaml to each other, both ways: the
// document is valid, each route is an operation of the document with the same method, path,
// operationId and path parameters, and each operation is a route. A route added to one and not
// the other fails here.
func TestRoutesMatchOpenAPI(t *testing.T) {
	doc, err := openapitest.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ops := openapitest.Operations(doc)
	specByPattern := map[string]openapitest.Operation{}
	for _, op := range ops {
		specByPattern[op.Pattern()] = op
		if !slices.Equal(slices.Sorted(slices.Values(op.TemplateParams)), op.DeclaredParams) {
			t.Errorf("openapi.yaml %s: path parameters declared %v; the path has %v", op.Pattern(), op.DeclaredParams, op.TemplateParams)
		}
	}
	routeByPattern := map[string]v1.Route{}
	for _, rt := range v1.Routes {
		p := rt.Method + " " + rt.Pattern
		if _, dup := routeByPattern[p]; dup {
			t.Errorf("v1.Routes lists %s twice", p)
		}
		routeByPattern[p] = rt
		op, ok := specByPattern[p]
		if !ok {
			t.Errorf("v1.Routes has %s (%s); openapi.yaml has no such operation", p, rt.OperationID)
			continue
		}
		if op.OperationID != rt.OperationID {
			t.Errorf("%s: operationId %q in openapi.yaml, %q in v1.Routes", p, op.OperationID, rt.OperationID)
		}
	}
	for _, op := range ops {
		if _, ok := routeByPattern[op.Pattern()]; !ok {
			t.Errorf("openapi.yaml has %s (%s); v1.Routes has no such route", op.Pattern(), op.OperationID)
		}
	}
	ids := map[string]string{}
	for _, op := range ops {
		if op.OperationID == "" {
			t.Errorf("openapi.yaml %s has no operationId", op.Pattern())
		} else if other, dup := ids[op.OperationID]; dup {
			t.Errorf("operationId %q is on %s and %s", op.OperationID, other, op.Pattern())
		}
		ids[op.OperationID] = op.Pattern()
	}
	if len(ops) != len(v1.Routes) {
		t.Errorf("openapi.yaml has %d operations, v1.Routes %d routes", len(ops), len(v1.Routes))
	}
}
