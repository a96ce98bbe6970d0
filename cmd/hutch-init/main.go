// Command hutch-init is the in-sandbox agent. It runs as PID 1 in every sandbox: PID 1
// re-executes itself as `hutch-init serve …` and only forwards signals and reaps orphans; the
// child serves the agent protocol (api/agent.md) on a unix socket (an inherited one, or one it
// creates) or, in gVisor sandboxes, on TCP on the loopback (--listen-tcp). Run outside PID 1 it
// serves directly.
//
// Every command's shell runs under `hutch-init shim`, a child subreaper, so the command's whole
// tree can be found and killed.
//
// Usage: hutch-init [serve] [--socket PATH | --listen-fd N | --listen-tcp ADDR] [--workdir DIR] [--state-dir DIR]
// [--process-dir DIR] [--process-log-bytes N] [--process-retention DURATION]
// [--session-file PATH] [--memory-limit BYTES] [--log-level LEVEL]
//
// --memory-limit makes the agent enforce the sandbox's memory limit itself (package oom,
// Enforcer): hutchd passes it for runtimes whose kernel does not (gVisor).
package main

import (
	"context"
	"flag"
	"fmt"
	"golang.org/x/sys/unix"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/internal/agent"
	"github.com/hutchdev/hutch/internal/agent/catrust"
	"github.com/hutchdev/hutch/internal/agent/oom"
	"github.com/hutchdev/hutch/internal/agent/process"
	"github.com/hutchdev/hutch/internal/agent/reaper"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

type config struct {
	socket   string
	listenFD int
	// listenTCP is a loopback address (127.0.0.1:PORT) to serve on: the gVisor backend cannot
	// hand PID 1 a socket (runtime.Features.RefusesExtraFiles).
	listenTCP string
	workdir   string
	stateDir  string
	// Background processes: where their records and logs are kept, the default log buffer
	// per stream (bytes), and how long finished ones are kept.
	processDir       string
	processLogBytes  int
	processRetention time.Duration
	// sessionFile keeps the sessions' cwd and env across a sleep or stop (on the sandbox's disk).
	sessionFile string
	// memoryLimit > 0: the sandbox's kernel does not enforce its memory limit (gVisor), the
	// agent does (oom.Enforcer), in bytes.
	memoryLimit int64
	logLevel    slog.Level
}

func parse(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("hutch-init", flag.ContinueOnError)
	fs.StringVar(&c.socket, "socket", "/run/hutch/agent.sock", "unix socket to serve on")
	fs.IntVar(&c.listenFD, "listen-fd", 0, "serve on this inherited listening socket (e.g. 3) instead of --socket")
	fs.StringVar(&c.listenTCP, "listen-tcp", "", "serve on this loopback TCP address (127.0.0.1:PORT) instead of --socket")
	fs.StringVar(&c.workdir, "workdir", "/workspace", "default cwd of sessions (created if missing)")
	fs.StringVar(&c.stateDir, "state-dir", "/run/hutch-agent", "private directory for per-command state files")
	fs.StringVar(&c.processDir, "process-dir", "/var/lib/hutch-agent/processes", "directory for the records and logs of background processes (mode 0700)")
	fs.IntVar(&c.processLogBytes, "process-log-bytes", process.DefaultLogBytes, "default log buffer per stream of a background process, in bytes (65536-268435456)")
	fs.DurationVar(&c.processRetention, "process-retention", process.DefaultRetention, "how long finished background processes are kept")
	fs.StringVar(&c.sessionFile, "session-file", "/var/lib/hutch-agent/sessions.json", "where sessions (cwd, env) are saved at shutdown and restored at start (on the sandbox's disk; empty: not kept)")
	fs.Int64Var(&c.memoryLimit, "memory-limit", 0, "enforce this memory limit (bytes) on the sandbox's processes, for runtimes whose kernel does not (gVisor); 0: the kernel does")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.processLogBytes < process.MinLogBytes || c.processLogBytes > process.MaxLogBytes {
		return c, fmt.Errorf("--process-log-bytes %d: want %d-%d", c.processLogBytes, process.MinLogBytes, process.MaxLogBytes)
	}
	if c.memoryLimit < 0 {
		return c, fmt.Errorf("--memory-limit %d: want bytes, or 0", c.memoryLimit)
	}
	if c.processRetention <= 0 {
		return c, fmt.Errorf("--process-retention %s: want a positive duration", c.processRetention)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.listenTCP != "" {
		ap, err := netip.ParseAddrPort(c.listenTCP)
		if err != nil || !ap.Addr().IsLoopback() || ap.Port() == 0 {
			return c, fmt.Errorf("--listen-tcp %q: want a loopback address and port (127.0.0.1:PORT)", c.listenTCP)
		}
		if c.listenFD > 0 {
			return c, fmt.Errorf("--listen-tcp and --listen-fd exclude each other")
		}
	}
	return c, nil
}

func main() {
	if err := nondumpable(); err != nil {
		fmt.Fprintln(os.Stderr, "hutch-init:", err)
		os.Exit(1)
	}
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "shim" {
		os.Exit(shim(args[1:]))
	}
	serve := len(args) > 0 && args[0] == "serve"
	if serve {
		args = args[1:]
	}
	cfg, err := parse(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hutch-init:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	if !serve && os.Getpid() == 1 {
		self, err := os.Executable()
		if err != nil {
			self = "/proc/self/exe"
		}
		// An inherited listening socket moves to the server child at the same fd number.
		var extra []uintptr
		for fd := 3; fd <= cfg.listenFD; fd++ {
			extra = append(extra, uintptr(fd))
		}
		code, err := reaper.Supervise(append([]string{self, "serve"}, args...), os.Environ(), extra, log.With("role", "pid1"))
		if err != nil {
			log.Error("supervise", "err", err)
		}
		os.Exit(code)
	}
	if err := run(cfg, log); err != nil {
		log.Error("agent failed", "err", err)
		os.Exit(1)
	}
}

// nondumpable makes this process non-dumpable, first thing after every exec of the agent's
// binary (PID 1, its server, each shim): an exec makes a process dumpable again. The sandbox's
// root has the agent's uid, so /proc/<pid>/mem (read and write), environ, maps, exe and
// pidfd_getfd would otherwise all be open to it: the server's heap keeps every command's env
// (operators' tokens) and PID 1 holds the agent's listening socket. Non-dumpable, they need
// CAP_SYS_PTRACE in the sandbox's user namespace, which the sandbox never has (not in its
// bounding set, no_new_privs, no new user namespace: ocispec.Capabilities, the seccomp
// profile). Until this call the process holds only what the exec gave it (the sandbox's env,
// or a command's own env, which that command holds too). It fails closed.
func nondumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}

// spareThreads is how many OS threads the server makes at start and keeps idle. Threads count
// against the sandbox's pids limit; a command that exhausts it (a fork bomb) would otherwise
// make the Go runtime fail to start a thread when the agent most needs one (to kill that
// command), which is fatal. Idle threads are kept by the runtime and reused.
const spareThreads = 32

// prestartThreads makes the runtime create about n OS threads, by keeping n goroutines in
// blocking system calls at once.
func prestartThreads(n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts := unix.NsecToTimespec(int64(20 * time.Millisecond))
			_ = unix.Nanosleep(&ts, nil)
		}()
	}
	wg.Wait()
}

func run(cfg config, log *slog.Logger) error {
	// In the background: the socket is served at once, the first command need not wait.
	go prestartThreads(spareThreads)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	if err := os.MkdirAll(cfg.stateDir, 0o700); err != nil {
		// A read-only /run: keep the per-command state in the temp dir instead.
		dir, terr := os.MkdirTemp("", "hutch-agent-")
		if terr != nil {
			return fmt.Errorf("state dir: %w (and %w)", err, terr)
		}
		log.Warn("state dir unusable, using a temp dir", "state_dir", cfg.stateDir, "err", err, "using", dir)
		cfg.stateDir = dir
	}
	installEgressCA(log)
	if cfg.memoryLimit > 0 {
		// Before the first command: its exec result must count the enforcer's kills.
		self, _ := os.Executable()
		e := &oom.Enforcer{
			Limit: cfg.memoryLimit, Server: os.Getpid(), Self: self,
			Pressure: oom.GuardPressureFile, GuardKill: oom.GuardKillFile, Log: log.With("role", "oom"),
		}
		oom.Default.Enforcer = e
		go func() {
			if err := e.Run(ctx); err != nil {
				log.Error("memory limit not enforced", "err", err)
			}
		}()
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("own path: %w", err)
	}
	srv, err := agent.New(agent.Config{
		Workdir: cfg.workdir, Env: os.Environ(), StateDir: cfg.stateDir, Version: version, Logger: log,
		Shim:         []string{self, "shim", "--fds", "2", "--"},
		TerminalShim: []string{self, "shim", "--"},
		ToolShim:     []string{self, "shim", "--"},
		ProcessDir:   cfg.processDir, ProcessLogBytes: cfg.processLogBytes, ProcessRetention: cfg.processRetention,
		MemoryLimit: cfg.memoryLimit,
		SessionFile: cfg.sessionFile,
	})
	if err != nil {
		return err
	}
	var ln net.Listener
	if cfg.listenFD > 0 {
		// hutchd made the socket on the host, in a directory this sandbox cannot see, and
		// handed over the listening end.
		f := os.NewFile(uintptr(cfg.listenFD), "agent-listener")
		ln, err = net.FileListener(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("listen fd %d: %w", cfg.listenFD, err)
		}
	} else if cfg.listenTCP != "" {
		// Only the sandbox's own processes and hutchd (from inside the namespace) reach its
		// loopback; hutchd refuses to expose this port (sandbox.AgentPort).
		if ln, err = net.Listen("tcp", cfg.listenTCP); err != nil {
			return fmt.Errorf("listen %s: %w", cfg.listenTCP, err)
		}
	} else if ln, err = agent.Listen(cfg.socket); err != nil {
		return err
	}
	log.Info("agent serving", "addr", ln.Addr().String(), "workdir", cfg.workdir, "version", version)
	return srv.Serve(ctx, ln)
}

// shim is `hutch-init shim [--fds N] -- CMD [ARG...]`: run CMD as a child subreaper (see
// reaper.Shim). The agent starts every command's shell this way.
func shim(args []string) int {
	fs := flag.NewFlagSet("hutch-init shim", flag.ContinueOnError)
	fds := fs.Int("fds", 0, "number of extra fds (3, 4, …) passed to the command")
	if err := fs.Parse(args); err != nil {
		return 125
	}
	return reaper.Shim(fs.Args(), *fds)
}

// installEgressCA trusts the sandbox's egress CA (catrust) and sets the CA variables' defaults
// in this process's environment, which every command inherits. Before the first command runs.
func installEgressCA(log *slog.Logger) {
	res := catrust.Install("/", os.Getenv)
	for _, kv := range res.Env {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			fmt.Fprintf(os.Stderr, "hutch-init: set %s: %v\n", k, err)
		}
	}
	for _, err := range res.Errs {
		log.Warn("egress CA install", "err", err)
	}
	if res.Fingerprint != "" {
		log.Info("egress CA trusted", "sha256", res.Fingerprint, "bundle", res.Bundle, "appended", res.Appended)
	}
}
