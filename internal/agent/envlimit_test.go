package agent

import (
	"strconv"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/envlimit"
)

// TestEnvOverKernelLimit: every endpoint that takes an env refuses, with a 400
// VALIDATION_FAILED, an entry execve would refuse (over MAX_ARG_STRLEN) or an env over the total,
// instead of failing to start the command; an entry at the limit runs.
func TestEnvOverKernelLimit(t *testing.T) {
	a := startAgent(t)
	atLimit := strings.Repeat("v", envlimit.MaxEntry-len("BIG=")-1)
	over := obj{"BIG": atLimit + "v"}
	total := obj{}
	for _, k := range []string{"A", "B", "C", "D", "E"} {
		total[k] = strings.Repeat("t", 120<<10)
	}
	for _, tc := range []struct {
		path string
		body func(env obj) obj
	}{
		{"/api/execute", func(env obj) obj { return obj{"command": "true", "env": env} }},
		{"/api/execute/stream", func(env obj) obj { return obj{"command": "true", "env": env} }},
		{"/api/process/start", func(env obj) obj { return obj{"command": "true", "env": env} }},
		{"/api/session/create", func(env obj) obj { return obj{"id": "big", "env": env} }},
		{"/api/contexts", func(env obj) obj { return obj{"envVars": env} }},
	} {
		for name, env := range map[string]obj{"entry": over, "total": total} {
			t.Run(tc.path+"/"+name, func(t *testing.T) {
				status, out := a.post(tc.path, tc.body(env))
				wantError(t, status, out, 400, "VALIDATION_FAILED")
				if msg, _ := out["message"].(string); !strings.Contains(msg, "bytes") {
					t.Errorf("message %q does not give the size", msg)
				}
			})
		}
	}
	res := a.exec(obj{"command": `test ${#BIG} -eq ` + strconv.Itoa(len(atLimit)) + ` && echo ok`, "env": obj{"BIG": atLimit}})
	if res["stdout"] != "ok\n" {
		t.Fatalf("an entry at the limit: %v", res)
	}
}
