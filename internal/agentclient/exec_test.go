package agentclient

import (
	"context"
	"net/http"
	"testing"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/errdefs"
)

// TestExec runs commands in the real agent: a result whatever the exit code, the agent's
// envelope for a refused command.
func TestExec(t *testing.T) {
	c, _ := startAgent(t)
	for _, tc := range []struct {
		req    v1.ExecRequest
		exit   int
		stdout string
		code   errdefs.Code // "" = a result
	}{
		{req: v1.ExecRequest{Command: "true"}},
		{req: v1.ExecRequest{Command: "echo hi; echo err >&2"}, stdout: "hi\n"},
		{req: v1.ExecRequest{Command: "exit 3"}, exit: 3},
		{req: v1.ExecRequest{Command: "echo $X", Env: map[string]string{"X": "y"}, SessionID: "s2"}, stdout: "y\n"},
		{req: v1.ExecRequest{Command: ""}, code: errdefs.CodeInvalidCommand},
	} {
		res, err := c.Exec(context.Background(), tc.req)
		if tc.code != "" {
			if !errdefs.IsCode(err, tc.code) || errdefs.HTTPStatus(err) != http.StatusBadRequest {
				t.Errorf("Exec(%q) = %+v, %v; want %s", tc.req.Command, res, err, tc.code)
			}
			continue
		}
		if err != nil || res.ExitCode != tc.exit || res.Stdout != tc.stdout || res.Command != tc.req.Command {
			t.Errorf("Exec(%q) = %+v, %v; want exit %d, stdout %q", tc.req.Command, res, err, tc.exit, tc.stdout)
		}
	}
}

// TestExecBadReply: a reply that is not an ExecResult is AGENT_UNAVAILABLE.
func TestExecBadReply(t *testing.T) {
	c := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/execute" || r.Header.Get("Content-Type") != "application/json" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("not json"))
	})
	if _, err := c.Exec(context.Background(), v1.ExecRequest{Command: "true"}); !errdefs.IsCode(err, errdefs.CodeAgentUnavailable) {
		t.Errorf("Exec = %v; want AGENT_UNAVAILABLE", err)
	}
}
