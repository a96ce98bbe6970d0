package agentclient

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// maxExecReply bounds an execute reply: 16 MiB of stdout and of stderr each (ExecResult's
// Truncated limit), JSON-escaped, and the rest.
const maxExecReply = 256 << 20

// Exec runs req to its end (execute, the route hutchd relays POST /v1/sandboxes/{id}/execute
// to) and returns its result; a non-zero exit code is not an error. Errors: the agent's
// (INVALID_COMMAND, COMMAND_TIMEOUT…), and those of every call.
func (c *Client) Exec(ctx context.Context, req v1.ExecRequest) (v1.ExecResult, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return v1.ExecResult{}, errdefs.Wrap(errdefs.CodeInternal, err, "encode exec request")
	}
	rt := agentapi.Public("execute")
	resp, err := c.call(ctx, rt, rt.Pattern, bytes.NewReader(b), int64(len(b)), http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return v1.ExecResult{}, err
	}
	defer resp.Body.Close()
	var res v1.ExecResult
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxExecReply)).Decode(&res); err != nil {
		return v1.ExecResult{}, errdefs.Wrap(errdefs.CodeAgentUnavailable, err, "exec: bad reply").With("id", c.id)
	}
	return res, nil
}
