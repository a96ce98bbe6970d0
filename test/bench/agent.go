package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
)

// agentDirect talks to a sandbox's hutch-init over its unix socket, bypassing hutchd, to split
// the API exec round trip into hutchd's share and the agent's share.
type agentDirect struct {
	hc  *http.Client
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
	return &agentDirect{hc: &http.Client{Transport: tr}, dir: dir}, nil
}

func (a *agentDirect) do(ctx context.Context, method, path string, body []byte) error {
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://agent/api/"+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("agent %s: status %d: %s", path, resp.StatusCode, b)
	}
	return nil
}

// ping is GET /api/ping: the transport and HTTP cost alone.
func (a *agentDirect) ping(ctx context.Context) error { return a.do(ctx, http.MethodGet, "ping", nil) }

// execTrue is POST /api/execute {"command":"true"} in the default session.
func (a *agentDirect) execTrue(ctx context.Context) error {
	return a.do(ctx, http.MethodPost, "execute", []byte(`{"command":"true"}`))
}

func (a *agentDirect) close() {
	a.hc.CloseIdleConnections()
	a.dir.Close()
}

// hostBash runs `bash --norc --noprofile -c true` on the host: the floor of spawning the shell
// that the agent starts for every command (without the state-saving wrapper).
func hostBash(ctx context.Context) error {
	return exec.CommandContext(ctx, "bash", "--norc", "--noprofile", "-c", "true").Run()
}
