package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agentclient"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/store"
)

// Paths inside every sandbox.
const (
	agentInContainer = "/.hutch/hutch-init"
	caBundlePath     = "/etc/ssl/certs/ca-certificates.crt"
	workspace        = "/workspace"
)

// ensureLocked starts rec's sandbox if it is not running. The caller holds the ID lock.
func (m *Manager) ensureLocked(ctx context.Context, rec store.Sandbox, progress io.Writer) error {
	m.mu.RLock()
	running := m.instances[rec.ID] != nil
	m.mu.RUnlock()
	if running {
		return nil
	}
	// Starting must not be cut short by the request that asked for it: a half-started sandbox
	// would be torn down again. It has its own deadline instead.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer cancel()
	if st := statusOf(rec); st != StatusCreating && st != StatusStarting {
		// Waking (from sleeping) or starting (from stopped or error): visible while it runs.
		if err := m.transition(ctx, rec.ID, StatusStarting, ""); err != nil {
			return err
		}
		if st == StatusSleeping {
			m.log.InfoContext(ctx, "waking sandbox", "sandbox_id", rec.ID)
		}
	}
	if err := m.start(ctx, rec, progress); err != nil {
		m.log.ErrorContext(ctx, "sandbox start failed", "sandbox_id", rec.ID, "err", err)
		m.auditStart(ctx, rec, err)
		if terr := m.teardown(ctx, rec, false); terr != nil {
			// The next start tears down again (teardown is idempotent); the error record says
			// why this one failed.
			m.log.ErrorContext(ctx, "teardown after failed start", "sandbox_id", rec.ID, "err", terr)
		}
		m.recordFailure(ctx, rec.ID, err.Error())
		if errdefs.CodeOf(err) == errdefs.CodeInternal {
			return errdefs.Wrap(errdefs.CodeSandboxStartFailed, err, "start sandbox "+strconv.Quote(rec.ID)).With("id", rec.ID)
		}
		return err
	}
	m.auditStart(ctx, rec, nil)
	return nil
}

// start runs every step of bringing a sandbox up. On error the caller tears down.
func (m *Manager) start(ctx context.Context, rec store.Sandbox, progress io.Writer) error {
	id := rec.ID
	it, err := LookupInstanceType(rec.InstanceType)
	if err != nil {
		return err
	}
	rt, err := m.runtimeOf(rec)
	if err != nil {
		return err
	}
	img, err := m.images.Resolve(ctx, rec.Image, progress)
	if err != nil {
		return err
	}
	dir := m.sandboxDir(id)
	for _, d := range []string{"rootfs", "etc"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return fmt.Errorf("sandbox dir: %w", err)
		}
	}
	ddir, err := m.prepareDisk(ctx, rec, it.DiskBytes)
	if err != nil {
		return err
	}
	for _, d := range []string{"upper", "work"} {
		if err := os.MkdirAll(filepath.Join(ddir, d), 0o700); err != nil {
			return fmt.Errorf("sandbox dir: %w", err)
		}
	}
	// The agent's socket: made here, handed to hutch-init as fd 3, closed here after start.
	// A backend that cannot hand it over (runtime.Features.RefusesExtraFiles) runs an agent
	// that listens on TCP on the namespace's loopback instead (AgentPort, runtimes.go).
	agentArgs := m.agentArgs()
	var agentFiles []*os.File
	if mem := it.Resources().MemoryBytes; mem > 0 && delegatesMemoryLimit(rt) {
		agentArgs = append(agentArgs, "--memory-limit", strconv.FormatInt(mem, 10))
	}
	tcpAgent := refusesExtraFiles(rt)
	if tcpAgent {
		agentArgs = tcpAgentArgs(agentArgs)
	} else {
		listener, err := m.listenAgent(id)
		if err != nil {
			return err
		}
		defer listener.Close()
		agentFiles = []*os.File{listener}
	}

	merged := filepath.Join(dir, "rootfs")
	lower, err := m.lowerDirs(ctx, rec, img.RootFS)
	if err != nil {
		return err
	}
	if err := m.mountRoot(ctx, rec, lower, ddir, merged); err != nil { // userns.go
		return err
	}
	n, err := m.nets.Setup(ctx, id, rec.NetSlot)
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	// Registering with egress (an nft transaction) runs alongside the container start. Until it
	// is done the firewall drops the sandbox's packets (unknown source), so this fails closed;
	// it is joined before the sandbox is reported ready.
	egressDone := make(chan error, 1)
	go func() { egressDone <- m.egress.AddSandbox(ctx, id, n) }()
	egressJoined := false
	defer func() {
		if !egressJoined {
			_ = <-egressDone // the start failed already: its error is the one reported
		}
	}()
	es, err := m.prepareEgress(ctx, rec)
	if err != nil {
		return err
	}
	etc, err := m.writeEtc(dir, id, n, img.RootFS, es.CACertPEM)
	if err != nil {
		return err
	}
	caMount, err := writeEgressCA(filepath.Join(dir, "etc"), es)
	if err != nil {
		return err
	}
	etc = append(etc, caMount...)
	spec := runtime.Spec{
		ID:        id,
		RootFS:    merged,
		Hostname:  id,
		Args:      agentArgs,
		Env:       withEgressEnv(sandboxEnv(id, rec.EnvVars), es),
		Cwd:       "/",
		NetNSPath: n.NSPath,
		Resources: it.Resources(),
		// PID 1's stdout and stderr: on the sandbox's own disk (inside its quota), because code
		// in the sandbox can write to them (/proc/1/fd/1), which must not fill the data volume.
		LogPath: filepath.Join(ddir, "agent.log"),
		Mounts: append([]runtime.Mount{
			{Source: m.agentPath, Destination: agentInContainer, ReadOnly: true},
		}, etc...),
		ExtraFiles: agentFiles,
		IDMap:      idMapOf(rec),
	}
	tr := m.agentTransport(id, n.NSPath, tcpAgent)
	wait := func() error { return waitAgent(ctx, agentclient.New(id, tr), m.cfg.AgentTimeout) }
	st, agentBin, restored, err := m.runContainer(ctx, rt, spec, statusOf(rec) == StatusSleeping, tr, wait)
	for _, f := range agentFiles {
		f.Close() // the agent holds the only copy now: it dies with the agent
	}
	if err != nil {
		return err
	}
	egressJoined = true
	if err := <-egressDone; err != nil {
		tr.CloseIdleConnections()
		return fmt.Errorf("egress: %w", err)
	}
	if !restored {
		if err := wait(); err != nil {
			tr.CloseIdleConnections()
			if errdefs.IsCode(err, errdefs.CodeAgentProtocol) {
				return err
			}
			logTail := tailFile(spec.LogPath, 2048)
			return errdefs.Wrap(errdefs.CodeAgentUnavailable, err, "agent did not answer").With("agentLog", logTail)
		}
	}
	if err := os.WriteFile(m.agentBinPath(id), []byte(agentBin), 0o600); err != nil {
		m.log.WarnContext(ctx, "record agent binary", "sandbox_id", id, "err", err)
	}
	inst := newInstance(st.Pid, n, tr, rec)
	inst.agentBin = agentBin
	m.mu.Lock()
	m.instances[id] = inst
	m.mu.Unlock()
	if err := m.transition(ctx, id, StatusRunning, ""); err != nil {
		return err
	}
	m.log.InfoContext(ctx, "sandbox running", "sandbox_id", id, "pid", st.Pid, "address", n.Addr.String(), "restored", restored)
	return nil
}

// teardown stops everything of a sandbox except its disk. Every step is idempotent, so it also
// cleans up after a crash half-way through start. With flush, the file system holding the
// sandbox's disk (its upper dir) is synced (syncfs) once the container's processes are gone,
// so file data written without fsync is on disk before the sandbox sleeps or stops.
func (m *Manager) teardown(ctx context.Context, rec store.Sandbox, flush bool) error {
	id := rec.ID
	m.mu.Lock()
	inst := m.instances[id]
	delete(m.instances, id)
	m.mu.Unlock()
	if inst != nil {
		inst.transport.CloseIdleConnections()
	}
	var errs []error
	rt, rtErr := m.runtimeOf(rec)
	if rtErr != nil {
		// Nothing can run on a backend this host lacks; the rest is still torn down.
		m.log.WarnContext(ctx, "teardown without the sandbox's runtime", "sandbox_id", id, "err", rtErr)
	} else if st, err := rt.State(ctx, id); err == nil {
		if st.Status == runtime.StatusRunning {
			_ = rt.Kill(ctx, id, syscall.SIGTERM, false)
			deadline := time.Now().Add(m.cfg.StopGrace)
			for time.Now().Before(deadline) {
				s, err := rt.State(ctx, id)
				if err != nil || s.Status != runtime.StatusRunning {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		if err := rt.Delete(ctx, id, true); err != nil {
			errs = append(errs, fmt.Errorf("delete container: %w", err))
		}
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		// The state cannot be read (a wedged runsc, say): remove the container anyway.
		if derr := rt.Delete(ctx, id, true); derr != nil && !errors.Is(derr, errdefs.ErrNotFound) {
			errs = append(errs, fmt.Errorf("container state: %w; delete: %w", err, derr))
		}
	}
	if flush {
		if err := syncDir(m.upperDir(id)); err != nil {
			errs = append(errs, fmt.Errorf("flush disk: %w", err))
		}
	}
	if err := m.egress.RemoveSandbox(ctx, id); err != nil {
		errs = append(errs, fmt.Errorf("egress: %w", err))
	}
	if err := m.nets.Teardown(ctx, id, rec.NetSlot); err != nil {
		errs = append(errs, fmt.Errorf("network: %w", err))
	}
	if err := m.rootfs.Unmount(filepath.Join(m.sandboxDir(id), "rootfs")); err != nil {
		errs = append(errs, fmt.Errorf("unmount: %w", err))
	} else if err := m.unmountDisk(id); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("teardown %s: %w", id, err)
	}
	return nil
}

// sandboxEnv is PID 1's environment: a sane base, then the sandbox's env vars. CA variables point
// every common TLS stack at the bundle hutchd mounts, so an operator's proxy CA is trusted.
func sandboxEnv(id string, vars map[string]string) []string {
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"TERM=xterm-256color",
		"HOSTNAME=" + id,
		"HUTCH_SANDBOX_ID=" + id,
		"SSL_CERT_FILE=" + caBundlePath,
		"NODE_EXTRA_CA_CERTS=" + caBundlePath,
		"REQUESTS_CA_BUNDLE=" + caBundlePath,
		"CURL_CA_BUNDLE=" + caBundlePath,
		"GIT_SSL_CAINFO=" + caBundlePath,
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

// writeEtc writes the sandbox's resolv.conf, hosts and CA bundle and returns their mounts.
func (m *Manager) writeEtc(dir, id string, n Net, imageRoot string, egressCA []byte) ([]runtime.Mount, error) {
	etc := filepath.Join(dir, "etc")
	files := map[string][]byte{
		"resolv.conf": fmt.Appendf(nil, "nameserver %s\noptions ndots:0\n", n.Gateway),
		"hosts":       fmt.Appendf(nil, "127.0.0.1\tlocalhost\n127.0.1.1\t%s\n%s\t%s\n", id, n.Addr, id),
		"hostname":    []byte(id + "\n"),
	}
	bundle, err := os.ReadFile(filepath.Join(imageRoot, caBundlePath))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read image CA bundle: %w", err)
	}
	for _, f := range m.cfg.ExtraCACerts {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read extra CA %s: %w", f, err)
		}
		if len(bundle) > 0 && !bytes.HasSuffix(bundle, []byte("\n")) {
			bundle = append(bundle, '\n')
		}
		bundle = append(bundle, pem...)
	}
	if len(egressCA) > 0 {
		// The sandbox's egress CA: intercepted hosts are served leaves it signs.
		if len(bundle) > 0 && !bytes.HasSuffix(bundle, []byte("\n")) {
			bundle = append(bundle, '\n')
		}
		bundle = append(bundle, egressCA...)
	}
	files["ca-certificates.crt"] = bundle
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(etc, name), data, 0o644); err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	return []runtime.Mount{
		{Source: filepath.Join(etc, "resolv.conf"), Destination: "/etc/resolv.conf", ReadOnly: true},
		{Source: filepath.Join(etc, "hosts"), Destination: "/etc/hosts", ReadOnly: true},
		{Source: filepath.Join(etc, "hostname"), Destination: "/etc/hostname", ReadOnly: true},
		{Source: filepath.Join(etc, "ca-certificates.crt"), Destination: caBundlePath, ReadOnly: true},
	}, nil
}

// The agent socket. hutchd creates it in <state>/agents (mode 0700, never mounted into any
// sandbox), binds and listens, and hands the listening socket to hutch-init as fd 3; then it
// closes its own copy. So:
//   - sandbox code cannot replace the socket with a symlink or anything else: it cannot see the
//     directory at all;
//   - when the container dies, the socket dies with its only holder and a dial gets "connection
//     refused": a request can never reach another sandbox that happens to reuse a PID (which a
//     path through /proc/<pid>/root would allow).
//
// Paths go through /proc/self/fd/<dirfd>/ so the 108-byte limit of socket paths holds for any
// state directory.

// agentSock is the path hutchd uses to reach id's agent socket.
func (m *Manager) agentSock(id string) string {
	return fmt.Sprintf("/proc/self/fd/%d/%s.sock", m.agentsDir.Fd(), id)
}

// listenAgent makes a fresh listening socket for id's agent and returns it as a file.
func (m *Manager) listenAgent(id string) (*os.File, error) {
	path := m.agentSock(id)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	f, err := ln.File()
	ln.Close()
	if err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	return f, nil
}

// agentTransport returns an HTTP transport to id's agent: its unix socket, or with tcp its
// TCP port inside the network namespace at nsPath (dialAgent).
func (m *Manager) agentTransport(id, nsPath string, tcp bool) *http.Transport {
	d := net.Dialer{Timeout: 5 * time.Second}
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return m.dialAgent(ctx, &d, id, nsPath, tcp)
		},
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// waitAgent pings the agent until it answers or timeout passes. An agent of another protocol
// version fails at once (AGENT_PROTOCOL_MISMATCH): waiting does not change it.
func waitAgent(ctx context.Context, agent *agentclient.Client, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for delay := time.Millisecond; ; delay = min(delay*2, 50*time.Millisecond) {
		_, err := agent.Ping(ctx)
		if err == nil || errdefs.IsCode(err, errdefs.CodeAgentProtocol) {
			return err
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %s: %w", timeout, last)
		case <-time.After(delay):
		}
	}
}

// installAgent copies the agent binary into the state dir under its content hash and returns
// the copy's path. A rebuilt hutch-init gets a new file, so running sandboxes keep theirs.
func installAgent(stateDir, src string) (string, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	sum := sha256.Sum256(data)
	dir := filepath.Join(stateDir, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	dst := filepath.Join(dir, "hutch-init-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	tmp, err := os.CreateTemp(dir, ".hutch-init-*")
	if err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", fmt.Errorf("agent binary: %w", err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return "", fmt.Errorf("agent binary: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", fmt.Errorf("agent binary: %w", err)
	}
	return dst, nil
}

func tailFile(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart) // on failure the whole file is read
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// agentArgs is hutch-init's command line in the container.
func (m *Manager) agentArgs() []string {
	args := []string{agentInContainer, "--listen-fd", "3", "--workdir", workspace}
	if m.cfg.ProcessLogBytes > 0 {
		args = append(args, "--process-log-bytes", strconv.Itoa(m.cfg.ProcessLogBytes))
	}
	if m.cfg.ProcessRetention > 0 {
		args = append(args, "--process-retention", m.cfg.ProcessRetention.String())
	}
	return args
}
