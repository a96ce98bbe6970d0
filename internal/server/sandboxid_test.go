package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/errdefs"
)

// TestForwardedRoutesRefuseBadID walks every route relayed to the agent: a malformed or
// reserved {id} is answered 400 by hutchd before any sandbox is looked up, as the API contract
// says, not as a sandbox that does not exist.
func TestForwardedRoutesRefuseBadID(t *testing.T) {
	s, srv := limitsServer(t)
	s.limiter = nil
	n := 0
	for _, rt := range v1.Routes {
		if !rt.Forwarded && rt.OperationID != "listTerminals" && rt.OperationID != "killTerminal" {
			continue
		}
		for id, want := range map[string]errdefs.Code{"Bad_ID": errdefs.CodeInvalidSandboxID, "api": errdefs.CodeReservedSandboxID} {
			method, path := routeRequest(rt.Method + " " + strings.Replace(rt.Pattern, "{id}", id, 1))
			req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var env errdefs.Envelope
			_ = json.NewDecoder(resp.Body).Decode(&env)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || method != http.MethodHead && env.Code != want {
				t.Errorf("%s %s: %d %s %q; want 400 %s", method, path, resp.StatusCode, env.Code, env.Message, want)
			}
			n++
		}
	}
	if n < 50 {
		t.Errorf("only %d requests sent; the walk missed routes", n)
	}
}
