package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
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

// hostSockets reports whether rt's containers cannot inherit the agent's socket and the agent
// listens in a bind-mounted directory instead (runtime.HostSocketer).
func hostSockets(rt runtime.Runtime) bool {
	hs, ok := rt.(runtime.HostSocketer)
	return ok && hs.HostSockets()
}

// Agent sockets of runtime.HostSocketer backends: hutch-init creates agentSocketName in
// <StateDir>/agents/<id>.d, a directory of its own mounted at agentSocketMount, and hutchd
// dials it there. The sandbox can replace what is in that directory, so hutchd never follows
// a symlink there (dialAgent).
const (
	agentSocketMount = "/.hutch/run"
	agentSocketName  = "agent.sock"
)

// agentSocketDir is the host directory holding id's agent socket when its agent listens in a
// bind mount.
func (m *Manager) agentSocketDir(id string) string {
	return fmt.Sprintf("/proc/self/fd/%d/%s.d", m.agentsDir.Fd(), id)
}

// prepareAgentSocketDir makes a fresh, empty agentSocketDir for id.
func (m *Manager) prepareAgentSocketDir(id string) (string, error) {
	dir := m.agentSocketDir(id)
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("agent socket dir: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("agent socket dir: %w", err)
	}
	// The mount source must be a real path: runsc resolves it in its own processes.
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("agent socket dir: %w", err)
	}
	return real, nil
}

// socketAgentArgs turns agentArgs' --listen-fd 3 into --socket <path in agentSocketMount>.
func socketAgentArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		if args[i] == "--listen-fd" && i+1 < len(args) {
			out = append(out, "--socket", agentSocketMount+"/"+agentSocketName)
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// dialAgent connects to id's agent: to its own socket dir's agent.sock when it has one, else
// to the socket hutchd made (agentSock). The first is opened with O_PATH|O_NOFOLLOW and must
// be a socket, then dialled through /proc/self/fd: a symlink the sandbox planted there cannot
// make hutchd connect to a host socket of its choosing.
func (m *Manager) dialAgent(ctx context.Context, d *net.Dialer, id string) (net.Conn, error) {
	dir := m.agentSocketDir(id)
	if _, err := os.Lstat(dir); err != nil {
		return d.DialContext(ctx, "unix", m.agentSock(id))
	}
	fd, err := unix.Open(filepath.Join(dir, agentSocketName), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("agent socket of %s is not a socket (mode %#o)", id, st.Mode)
	}
	return d.DialContext(ctx, "unix", fmt.Sprintf("/proc/self/fd/%d", fd))
}
