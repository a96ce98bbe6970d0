package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/netns"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/store"
)

// Isolation runtimes a sandbox can ask for (CreateOptions.Runtime, Info.Runtime).
const (
	RuntimeRunc   = "runc"
	RuntimeGVisor = "gvisor"
)

// RuntimeNames are the runtime names hutch knows, whether or not this host can run them.
var RuntimeNames = []string{RuntimeRunc, RuntimeGVisor}

// AddRuntime makes another isolation backend available under rt.Name() (the backend given to
// New is always available). Call it before Recover and before serving.
func (m *Manager) AddRuntime(rt runtime.Runtime) {
	m.runtimes[rt.Name()] = rt
	delete(m.unavailable, rt.Name())
}

// SetRuntimeUnavailable records why known runtime name cannot run on this host (runsc is not
// installed, …): sandboxes asking for it fail with RUNTIME_NOT_AVAILABLE and this reason.
// Call it before Recover and before serving.
func (m *Manager) SetRuntimeUnavailable(name string, reason error) {
	if _, ok := m.runtimes[name]; !ok {
		m.unavailable[name] = reason
	}
}

// SetDefaultRuntime makes name the runtime of sandboxes created without one. Errors:
// INVALID_RUNTIME, RUNTIME_NOT_AVAILABLE. Call it before serving.
func (m *Manager) SetDefaultRuntime(name string) error {
	if _, err := m.backend(name); err != nil {
		return err
	}
	m.defaultRuntime = name
	return nil
}

// DefaultRuntime is the runtime of sandboxes created without one.
func (m *Manager) DefaultRuntime() string { return m.defaultRuntime }

// backend returns the backend called name. Errors: INVALID_RUNTIME (a name hutch does not
// know), RUNTIME_NOT_AVAILABLE (known, but not on this host).
func (m *Manager) backend(name string) (runtime.Runtime, error) {
	if rt, ok := m.runtimes[name]; ok {
		return rt, nil
	}
	if !slices.Contains(RuntimeNames, name) {
		return nil, errdefs.Newf(errdefs.CodeInvalidRuntime, "unknown runtime %q (known: %v)", name, RuntimeNames).
			With("runtime", name).With("known", RuntimeNames)
	}
	reason := m.unavailable[name]
	if reason == nil {
		reason = errors.New("not configured on this hutchd")
	}
	return nil, errdefs.Newf(errdefs.CodeRuntimeNotAvailable, "runtime %q is not available: %v", name, reason).
		With("runtime", name).With("reason", reason.Error())
}

// runtimeOf returns the backend of rec (records from before runtimes were stored say "runc").
func (m *Manager) runtimeOf(rec store.Sandbox) (runtime.Runtime, error) {
	name := rec.Runtime
	if name == "" {
		name = RuntimeRunc
	}
	return m.backend(name)
}

// refusesExtraFiles reports whether rt cannot hand the agent its listening socket
// (runtime.Features.RefusesExtraFiles): the agent then listens on TCP on the loopback of the
// sandbox's network namespace (AgentPort).
func refusesExtraFiles(rt runtime.Runtime) bool { return rt.Features().RefusesExtraFiles }

// delegatesMemoryLimit reports whether rt's sandbox kernel leaves the memory limit to the agent
// (runtime.Features.DelegatesMemoryLimit): hutch-init then gets --memory-limit.
func delegatesMemoryLimit(rt runtime.Runtime) bool { return rt.Features().DelegatesMemoryLimit }

// AgentPort is the loopback port the agent of a gVisor sandbox listens on (127.0.0.1 of the
// sandbox's own network namespace; runsc cannot hand PID 1 a socket). hutchd dials it from
// inside the namespace; it is never exposed (preview URLs refuse it, DialPort refuses it), and
// it lies below the kernel's ephemeral port range (32768-60999), so no outgoing connection of
// the sandbox can hold it when the agent starts or a restore binds it again. Processes of the
// sandbox can connect to it, as they can to the unix socket of a runc sandbox's agent: the
// agent serves the sandbox's own root.
const AgentPort = 30999

// tcpAgentArgs turns agentArgs' --listen-fd 3 into --listen-tcp 127.0.0.1:AgentPort.
func tcpAgentArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		if args[i] == "--listen-fd" && i+1 < len(args) {
			out = append(out, "--listen-tcp", fmt.Sprintf("127.0.0.1:%d", AgentPort))
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// dialAgent connects to id's agent: over TCP to AgentPort inside the namespace at nsPath when
// tcp is set, else to the unix socket hutchd made (agentSock).
func (m *Manager) dialAgent(ctx context.Context, d *net.Dialer, id, nsPath string, tcp bool) (net.Conn, error) {
	if !tcp {
		return d.DialContext(ctx, "unix", m.agentSock(id))
	}
	ctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	c, err := netns.Dial(ctx, nsPath, "tcp4", fmt.Sprintf("127.0.0.1:%d", AgentPort))
	if err != nil {
		// A failed dial is a *net.OpError "dial", as the unix dial's: the API layer checks the
		// container (and restarts a dead sandbox) on exactly that.
		var op *net.OpError
		if !errors.As(err, &op) {
			err = &net.OpError{Op: "dial", Net: "tcp", Err: err}
		}
		return nil, err
	}
	return c, nil
}
