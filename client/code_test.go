package client

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
)

// TestRunCodeStreamDestroyed: a run cut by its sandbox's destroy ends in SANDBOX_NOT_FOUND
// with hutchd's message, whether the event carries it as value (the CodeEvent shape) or as
// error (older servers).
func TestRunCodeStreamDestroyed(t *testing.T) {
	const msg = `sandbox "box" was destroyed`
	for name, end := range map[string]map[string]any{
		"value": {"type": "error", "code": "SANDBOX_NOT_FOUND", "name": "SandboxDestroyed", "value": msg, "traceback": []string{}},
		"error": {"type": "error", "code": "SANDBOX_NOT_FOUND", "error": msg, "timestamp": "2025-01-01T00:00:00Z"},
	} {
		t.Run(name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("POST /v1/sandboxes/box/run-code", func(w http.ResponseWriter, r *http.Request) {
				readJSON(t, r)
				sw := sse.NewWriter(w)
				for _, ev := range []any{map[string]any{"type": "stdout", "text": "hi\n"}, end} {
					if err := sw.Send(ev); err != nil {
						t.Errorf("send: %v", err)
					}
				}
			})
			c := newTestClient(t, mux)
			var texts []string
			var last error
			for ev, err := range c.SandboxHandle("box").RunCodeStream(t.Context(), "print('hi')", nil) {
				if err != nil {
					last = err
					break
				}
				texts = append(texts, ev.Text)
			}
			if strings.Join(texts, "") != "hi\n" {
				t.Errorf("output %q; want %q", texts, "hi\n")
			}
			if !errdefs.IsCode(last, errdefs.CodeSandboxNotFound) || !strings.Contains(last.Error(), msg) {
				t.Fatalf("err = %v; want SANDBOX_NOT_FOUND with %q", last, msg)
			}
		})
	}
}
