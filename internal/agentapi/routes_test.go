package agentapi

import (
	"net/http"
	"testing"

	v1 "github.com/hutchdev/hutch/api/v1"
)

// TestRoutesCoverThePublicRelays: every Forwarded public route has its agent route, at the path
// v1.Route.AgentPath names, with its method and body; the terminal routes hutchd relays are
// there too; nothing else public is.
func TestRoutesCoverThePublicRelays(t *testing.T) {
	byID := map[string]Route{}
	for _, r := range Routes {
		if _, dup := byID[r.ID]; dup {
			t.Errorf("route ID %s twice", r.ID)
		}
		byID[r.ID] = r
	}
	for _, pub := range v1.Routes {
		r, ok := byID[pub.OperationID]
		switch {
		case pub.Forwarded && !ok:
			t.Errorf("forwarded %s %s has no agent route", pub.Method, pub.Pattern)
		case pub.Forwarded && (r.Pattern != pub.AgentPath() || r.Method != pub.Method || r.Body != pub.Body || r.Public.Pattern != pub.Pattern):
			t.Errorf("%s: agent route %+v does not match %+v", pub.OperationID, r, pub)
		case !pub.Forwarded && ok && !relayed[pub.OperationID]:
			t.Errorf("%s is hutchd's own route but has an agent route", pub.OperationID)
		}
	}
	for id := range relayed {
		if r, ok := byID[id]; !ok || r.Public == nil {
			t.Errorf("relayed %s has no public agent route", id)
		}
	}
	for _, id := range []string{"saveSessions", "archive", "extract"} {
		if r, ok := byID[id]; !ok || r.Public != nil {
			t.Errorf("agent-only route %s: %+v", id, r)
		}
	}
}

// TestRoutesRegister: the table's patterns are distinct and valid ServeMux patterns (a
// conflict or a bad pattern panics), with at most one wildcard each.
func TestRoutesRegister(t *testing.T) {
	mux := http.NewServeMux()
	seen := map[string]bool{}
	for _, r := range Routes {
		if seen[r.MuxPattern()] {
			t.Errorf("pattern %s twice", r.MuxPattern())
		}
		seen[r.MuxPattern()] = true
		mux.HandleFunc(r.MuxPattern(), func(http.ResponseWriter, *http.Request) {})
		if r.Wildcard() != "" {
			one := r.Pattern[len("/api/"):]
			n := 0
			for _, c := range one {
				if c == '{' {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%s has %d wildcards", r.Pattern, n)
			}
		}
	}
}

func TestWildcardAndPath(t *testing.T) {
	for _, tc := range []struct{ pattern, wildcard, value, path string }{
		{"/api/ping", "", "x", "/api/ping"},
		{"/api/process/{pid}", "pid", "p1", "/api/process/p1"},
		{"/api/process/{pid}/logs", "pid", "a/b", "/api/process/a%2Fb/logs"},
		{"/api/contexts/{cid}/run", "cid", "..", "/api/contexts/../run"},
		{"/api/terminals/{tid...}", "tid", "t 1", "/api/terminals/t%201"},
	} {
		r := Route{Pattern: tc.pattern}
		if got := r.Wildcard(); got != tc.wildcard {
			t.Errorf("Wildcard(%s) = %q, want %q", tc.pattern, got, tc.wildcard)
		}
		if got := r.Path(tc.value); got != tc.path {
			t.Errorf("Path(%s, %q) = %q, want %q", tc.pattern, tc.value, got, tc.path)
		}
	}
}

func TestPublic(t *testing.T) {
	if r := Public("getProcessLogs"); r.MuxPattern() != "GET /api/process/{pid}/logs" || r.Operation != "process.logs" {
		t.Errorf("getProcessLogs: %+v", r)
	}
	if Ping.MuxPattern() != "GET /api/ping" || Ping.Operation != "ping" {
		t.Errorf("Ping: %+v", Ping)
	}
	defer func() {
		if recover() == nil {
			t.Error("Public of hutchd's own route did not panic")
		}
	}()
	Public("listSandboxes")
}
