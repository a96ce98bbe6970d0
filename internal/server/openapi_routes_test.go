package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/openapitest"
)

// unspecifiedPatterns are the registered routes api/openapi.yaml does not describe: the
// catch-all 404, the favicon and the console's static files.
var unspecifiedPatterns = []string{"/", "GET /favicon.ico", "/console/", "/console"}

// TestRegisteredRoutesMatchOpenAPI holds the routes the server registers to api/openapi.yaml,
// both ways: every operation of the document is registered under its method and path, and
// every other registered pattern (bar unspecifiedPatterns) is a refusal of a method the
// document does not give its path, answering 405 METHOD_NOT_ALLOWED with an Allow header of
// exactly the document's methods. A route served by the server and missing from the document,
// or the reverse, fails here.
func TestRegisteredRoutesMatchOpenAPI(t *testing.T) {
	doc, err := openapitest.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s, srv := limitsServer(t)
	specMethods := map[string][]string{} // path -> its methods in the document
	inSpec := map[string]bool{}
	for _, op := range openapitest.Operations(doc) {
		inSpec[op.Pattern()] = true
		specMethods[op.Path] = append(specMethods[op.Path], op.Method)
		if !slices.Contains(s.patterns, op.Pattern()) {
			t.Errorf("openapi.yaml has %s (%s); the server does not register it", op.Pattern(), op.OperationID)
		}
	}
	refusals := 0
	for _, p := range s.patterns {
		if inSpec[p] || slices.Contains(unspecifiedPatterns, p) {
			continue
		}
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			t.Errorf("the server registers %s, for every method; openapi.yaml has no such path", p)
			continue
		}
		want, known := specMethods[path]
		if !known {
			t.Errorf("the server registers %s; openapi.yaml has no path %s", p, path)
			continue
		}
		_, concrete := routeRequest(p)
		req, _ := http.NewRequest(method, srv.URL+concrete, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var env struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || method != http.MethodHead && env.Code != "METHOD_NOT_ALLOWED" {
			t.Errorf("the server serves %s (%d %s); openapi.yaml has no such operation", p, resp.StatusCode, env.Code)
			continue
		}
		allow := strings.Split(resp.Header.Get("Allow"), ", ")
		if !slices.Equal(slices.Sorted(slices.Values(allow)), slices.Sorted(slices.Values(want))) {
			t.Errorf("%s: Allow %q; openapi.yaml has %v on %s", p, resp.Header.Get("Allow"), want, path)
		}
		refusals++
	}
	if refusals == 0 {
		t.Error("no 405 refusal among the registered patterns; the walk missed them")
	}
}
