package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/internal/agentclient"
)

// agentDirect talks to a sandbox's hutch-init over its unix socket, bypassing hutchd, to split
// the API exec round trip into hutchd's share and the agent's share. It speaks through hutchd's
// own agent client, so the agent's share is what hutchd pays.
type agentDirect struct {
	c   *agentclient.Client
	tr  *http.Transport
	dir *os.File // <state>/agents, named by the socket path: kept open (and referenced) until close
}

// newAgentDirect dials the sandbox's agent socket, <state>/agents/<id>.sock, as hutchd itself
// does (through a /proc/self/fd path, so long state dirs stay under the socket path limit).
func newAgentDirect(ctx context.Context, stateDir, id string) (*agentDirect, error) {
	dir, err := os.Open(filepath.Join(stateDir, "agents"))
	if err != nil {
		return nil, err
	}
	sock := fmt.Sprintf("/proc/self/fd/%d/%s.sock", dir.Fd(), id)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableCompression: true,
	}
	return &agentDirect{c: agentclient.New(id, tr), tr: tr, dir: dir}, nil
}

// ping is GET /api/ping: the transport and HTTP cost alone.
func (a *agentDirect) ping(ctx context.Context) error {
	_, err := a.c.Ping(ctx)
	return err
}

// execTrue is POST /api/execute {"command":"true"} in the default session.
func (a *agentDirect) execTrue(ctx context.Context) error {
	res, err := a.c.Exec(ctx, v1.ExecRequest{Command: "true"})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("agent execute true: exit code %d", res.ExitCode)
	}
	return err
}

func (a *agentDirect) close() {
	a.tr.CloseIdleConnections()
	a.dir.Close()
}

// hostBash runs `bash --norc --noprofile -c true` on the host: the floor of spawning the shell
// that the agent starts for every command (without the state-saving wrapper).
func hostBash(ctx context.Context) error {
	return exec.CommandContext(ctx, "bash", "--norc", "--noprofile", "-c", "true").Run()
}
