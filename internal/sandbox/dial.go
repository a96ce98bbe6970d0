package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/netns"
	"github.com/hutchdev/hutch/internal/sandboxid"
)

// ConnectTimeout bounds one connect into a sandbox (its server may never accept).
const ConnectTimeout = 10 * time.Second

// DialPort opens a TCP connection to port inside sandbox id's network namespace, as a process
// in the sandbox would reach localhost: 127.0.0.1:port first and, when that is refused,
// [::1]:port. A stopped sandbox is started first (as Ensure does). port is 1–65535. Errors:
// INVALID_PORT (also for AgentPort), SANDBOX_NOT_FOUND, SANDBOX_START_FAILED; nothing
// listening → the IPv4 dial's error, which matches syscall.ECONNREFUSED.
func (m *Manager) DialPort(ctx context.Context, id sandboxid.ID, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, errdefs.Newf(errdefs.CodeInvalidPort, "port %d is outside 1-65535", port).With("port", port)
	}
	if port == AgentPort {
		return nil, errdefs.Newf(errdefs.CodeInvalidPort, "port %d is reserved for the sandbox's agent", port).With("port", port)
	}
	nsPath, err := m.nsPath(ctx, id)
	if err != nil {
		return nil, err
	}
	p := strconv.Itoa(port)
	ctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	conn, err := netns.Dial(ctx, nsPath, "tcp4", "127.0.0.1:"+p)
	if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		return conn, err
	}
	if conn6, err6 := netns.Dial(ctx, nsPath, "tcp6", "[::1]:"+p); err6 == nil {
		return conn6, nil
	}
	return nil, err
}

// nsPath makes sure id runs and returns its network namespace path. A sandbox stopped between
// the start and the lookup is started again, once.
func (m *Manager) nsPath(ctx context.Context, sid sandboxid.ID) (string, error) {
	id := sid.String()
	for range 2 {
		if _, err := m.Ensure(ctx, sid); err != nil {
			return "", err
		}
		m.mu.RLock()
		inst := m.instances[id]
		m.mu.RUnlock()
		if inst != nil {
			return inst.net.NSPath, nil
		}
	}
	return "", errdefs.Newf(errdefs.CodeSandboxStartFailed, "sandbox %q stopped while connecting to it", id).With("id", id)
}

// PingAgent asks the agent of running sandbox id whether it answers (GET /api/ping), before ctx
// ends. It neither starts a stopped sandbox nor counts as activity (a ping keeps no sandbox
// awake). gVisor's memory guard calls it to tell an agent starved of CPU (runsc.Config.AgentProbe).
// Errors: SANDBOX_NOT_FOUND when id is not running here; else agentclient.Client.Ping's.
func (m *Manager) PingAgent(ctx context.Context, sid sandboxid.ID) error {
	id := sid.String()
	m.mu.RLock()
	inst := m.instances[id]
	m.mu.RUnlock()
	if inst == nil {
		return errdefs.Newf(errdefs.CodeSandboxNotFound, "sandbox %q is not running", id).With("id", id)
	}
	if _, err := inst.agent.Ping(ctx); err != nil {
		return fmt.Errorf("ping the agent of %s: %w", id, err)
	}
	return nil
}
