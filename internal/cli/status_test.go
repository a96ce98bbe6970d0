package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStatusSleep: `hutch status NAME` prints the sleep mode and note of a sleeping sandbox,
// and neither line when the API leaves them out.
func TestStatusSleep(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		info := map[string]any{"id": r.PathValue("id"), "status": "running", "image": "default",
			"instanceType": "lite", "createdAt": "2025-01-01T00:00:00Z"}
		if r.PathValue("id") == "napping" {
			info["status"] = "sleeping"
			info["sleepMode"] = "disk"
			info["sleepNote"] = "checkpoint failed: open TCP connections"
		}
		reply(w, http.StatusOK, info)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	r := run(t, srv.URL, "", "status", "napping")
	if r.code != 0 {
		t.Fatalf("status napping = %+v", r)
	}
	for _, want := range []string{"sleeping", "Sleep mode:", "disk", "Sleep note:", "checkpoint failed: open TCP connections"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status napping lacks %q:\n%s", want, r.stdout)
		}
	}
	r = run(t, srv.URL, "", "status", "awake")
	if r.code != 0 || strings.Contains(r.stdout, "Sleep mode:") || strings.Contains(r.stdout, "Sleep note:") {
		t.Errorf("status awake = %+v; want no sleep mode or note", r)
	}
}
