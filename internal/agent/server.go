// Package agent is hutch-init's HTTP server: it wires the agent protocol (api/agent.md) on a
// unix socket to the session, process, files and gitclone packages, and turns errors into
// errdefs envelopes.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hutchdev/hutch/internal/agent/interp"
	"github.com/hutchdev/hutch/internal/agent/process"
	"github.com/hutchdev/hutch/internal/agent/session"
	"github.com/hutchdev/hutch/internal/agent/terminal"
	"github.com/hutchdev/hutch/internal/agent/watch"
	"github.com/hutchdev/hutch/internal/connlimit"
)

// processShutdownGrace is how long background processes get between SIGTERM and SIGKILL when
// the agent shuts down.
const processShutdownGrace = 3 * time.Second

// Config configures a Server.
type Config struct {
	// Workdir is the default cwd of sessions and the parent of default git clone targets
	// (absolute). It is created if missing.
	Workdir string
	// Env is the sandbox environment ("KEY=value"), the base env of sessions.
	Env []string
	// StateDir is a private directory for per-command state files (absolute). It is created
	// with mode 0700 if missing.
	StateDir string
	// Version is reported by /api/ping.
	Version string
	// Shim is the argv prefix every command's shell is started under (hutch-init's
	// `shim --fds 2 --`), which makes the command's whole tree findable; nil starts bash
	// directly (tests). Code interpreter kernels start under it too.
	Shim []string
	// ProcessDir keeps the records and held logs of background processes across agent
	// restarts (created with mode 0700); empty keeps them in memory only. A directory that
	// cannot be used is logged and the records are kept in memory.
	ProcessDir string
	// ProcessLogBytes is the default log buffer per stream of a background process, in bytes
	// (64 KiB–256 MiB); 0 means 4 MiB.
	ProcessLogBytes int
	// ProcessRetention is how long finished background processes are kept; 0 means 1 h.
	ProcessRetention time.Duration
	// MemoryLimit is the sandbox's memory limit in bytes when the agent enforces it itself
	// (hutch-init --memory-limit, gVisor); 0 means the limit is read from the sandbox's cgroup.
	// The processes' log budget is a share of it (process.LogBudgetShare).
	MemoryLimit int64
	// SessionFile keeps the sessions (ID, cwd, environment) across a shutdown: Serve saves
	// them there when it shuts down and New restores them (session.Config.SaveFile). It must be
	// on the sandbox's disk (not a tmpfs); empty disables it.
	SessionFile string
	// TerminalShim is the argv prefix terminal shells are started under (hutch-init's
	// `shim --`, passing no extra fds); nil starts the shell directly (tests).
	TerminalShim []string
	// ToolShim is the argv prefix the agent's own runs of git (git/checkout, a backup's
	// gitignore listing) are started under (hutch-init's `shim --`), so that they run demoted
	// like commands; nil runs git directly (tests).
	ToolShim []string
	// TerminalBufferBytes is the output ring buffer per terminal, in bytes (256 KiB–64 MiB);
	// 0 means 1 MiB.
	TerminalBufferBytes int
	// Logger receives diagnostics; nil means slog.Default().
	Logger *slog.Logger
}

// Server serves the agent protocol. It is safe for concurrent use.
type Server struct {
	sessions *session.Manager
	procs    *process.Manager
	watches  *watch.Manager // file watches and the change journal
	terms    *terminal.Manager
	code     *interp.Manager // code interpreter contexts (handle_code.go)
	workdir  string
	version  string
	log      *slog.Logger
	router   *router  // agentapi.Routes (routes.go)
	toolShim []string // Config.ToolShim
}

// New returns a Server, creating cfg.Workdir and cfg.StateDir.
func New(cfg Config) (*Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if !filepath.IsAbs(cfg.Workdir) || !filepath.IsAbs(cfg.StateDir) {
		return nil, fmt.Errorf("agent: workdir %q and state dir %q must be absolute", cfg.Workdir, cfg.StateDir)
	}
	if err := os.MkdirAll(cfg.Workdir, 0o755); err != nil {
		return nil, fmt.Errorf("agent: create workdir: %w", err)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: create state dir: %w", err)
	}
	if err := os.Chmod(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: chmod state dir: %w", err)
	}
	m, err := session.NewManager(session.Config{Workdir: cfg.Workdir, Env: cfg.Env, StateDir: cfg.StateDir, Shim: cfg.Shim, SaveFile: cfg.SessionFile, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	version := cfg.Version
	if version == "" {
		version = "dev"
	}
	pcfg := process.Config{Sessions: m, Dir: cfg.ProcessDir, LogBytes: cfg.ProcessLogBytes, Retention: cfg.ProcessRetention, Logger: log}
	if cfg.MemoryLimit > 0 {
		pcfg.LogBudget = cfg.MemoryLimit / process.LogBudgetShare
	}
	procs, err := process.NewManager(pcfg)
	if err != nil && cfg.ProcessDir != "" {
		log.Warn("process dir unusable, keeping process records in memory", "process_dir", cfg.ProcessDir, "err", err)
		pcfg.Dir = ""
		procs, err = process.NewManager(pcfg)
	}
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("agent: %w", err)
	}
	terms, err := terminal.NewManager(terminal.Config{Sessions: m, Shim: cfg.TerminalShim, BufferBytes: cfg.TerminalBufferBytes, Logger: log})
	if err != nil {
		procs.Shutdown(0)
		m.Close()
		return nil, fmt.Errorf("agent: %w", err)
	}
	s := &Server{sessions: m, procs: procs, terms: terms, workdir: m.Workdir(), version: version, log: log, toolShim: cfg.ToolShim}
	// Code interpreter: one registered factory per language.
	s.code = interp.NewManager(interp.Config{Logger: log})
	s.code.Register("python", interp.NewPythonFactory(interp.PythonConfig{Workdir: s.workdir, Env: cfg.Env, Shim: cfg.Shim, Logger: log}))
	s.code.Register("javascript", interp.NewJavaScriptFactory(interp.JSConfig{Workdir: s.workdir, Env: cfg.Env, Shim: cfg.Shim, Logger: log}))
	s.code.Register("typescript", interp.NewTypeScriptFactory(interp.JSConfig{Workdir: s.workdir, Env: cfg.Env, Shim: cfg.Shim, Logger: log}))
	s.watches = watch.NewManager(watch.Config{Roots: append(slices.Clone(watch.DefaultRoots), s.workdir), Logger: log})
	s.router = s.newRouter()
	return s, nil
}

// Serve serves on ln until ctx ends, then saves the sessions (Config.SessionFile), cancels the
// contexts of the requests in flight (a backup extraction then removes its work directory),
// kills the terminals (SIGHUP, 2 s, SIGKILL), terminates the background processes (SIGTERM,
// 3 s, SIGKILL; their final records are saved),
// kills every running command and shuts down. It returns nil after a shutdown caused by ctx.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// Requests see their context cancelled when the shutdown begins, so that handlers clean up
	// (a backup extraction removes its work directory) before srv.Shutdown's wait ends.
	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context { return reqCtx }}
	errc := make(chan error, 1)
	// Accept errors but the listener's closing (ENOMEM in a sandbox at its memory limit,
	// ENOBUFS) are retried: net/http's Serve would return on them and PID 1 with it.
	go func() { errc <- srv.Serve(connlimit.Retrying(ln, "agent", s.log)) }()
	select {
	case err := <-errc:
		s.Close()
		return fmt.Errorf("agent: serve: %w", err)
	case <-ctx.Done():
	}
	if n, err := s.sessions.Save(); err != nil {
		s.log.Error("could not save sessions", "err", err)
	} else if n > 0 {
		s.log.Info("sessions saved", "count", n)
	}
	s.watches.Close() // each stream ends with "stopped" before the requests are cancelled
	cancelReqs()
	s.code.Close()
	s.terms.Close()
	s.procs.Shutdown(processShutdownGrace)
	s.sessions.Close()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	_ = <-errc // http.ErrServerClosed after Shutdown
	return nil
}

// Close kills the terminals, terminates the background processes (as Serve does at shutdown; no
// new ones start)
// and kills every running command.
func (s *Server) Close() {
	s.watches.Close()
	s.code.Close()
	s.terms.Close()
	s.procs.Shutdown(processShutdownGrace)
	s.sessions.Close()
}

// Listen listens on the unix socket at path with mode 0600, creating its directory and
// removing a stale socket left by an earlier run. A non-socket file at path is an error.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("agent: socket dir: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("agent: %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("agent: remove stale socket: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("agent: stat socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("agent: listen: %w", err)
	}
	// gVisor refuses chmod on a socket it created in a host directory (--host-uds=create, see
	// internal/runtime/runsc); there the directory hutchd made (0700) is the protection.
	if err := os.Chmod(path, 0o600); err != nil && !errors.Is(err, fs.ErrPermission) {
		ln.Close()
		return nil, fmt.Errorf("agent: chmod socket: %w", err)
	}
	return ln, nil
}
