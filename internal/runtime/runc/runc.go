// Package runc is the runc backend of internal/runtime: it writes an OCI bundle (config.json
// generated from a runtime.Spec with the runtime-spec Go types) per container and drives the
// runc binary (run -d, state, list, kill, delete, exec).
//
// All container state lives in runc's own state directory (Config.Root) and in the bundles
// (Config.BundleDir/<id>/config.json, which `runc exec` re-reads); a Runtime keeps none in
// memory, so a restarted hutchd finds its containers with List.
//
// Errors from runc are classified by its stderr text ("container does not exist" →
// errdefs.ErrNotFound, "already exists" → errdefs.ErrAlreadyExists, "not running"/"not stopped"
// → errdefs.ErrFailedPrecondition); anything else is errdefs.ErrInternal. The text is runc's,
// an external tool's, so matching it is the only way to classify it.
//
// Isolation defaults (the spec of internal/runtime/ocispec): namespaces pid, ipc, uts, mount, network,
// cgroup; Docker's default capabilities minus NET_RAW; no_new_privs; a seccomp deny list; runc's
// masked and read-only paths; cgroup limits at /hutch/<id> (cgroup v1 and v2).
package runc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// Config configures a Runtime.
type Config struct {
	// Binary is the runc executable: a path, or a name looked up on PATH. Empty means "runc".
	Binary string
	// Root is runc's state directory (runc --root), e.g. <stateDir>/runc. Required.
	Root string
	// BundleDir holds one bundle directory per container (<BundleDir>/<id>/config.json).
	// Required.
	BundleDir string
	// CgroupParent is the cgroup (below each hierarchy's root) that holds one cgroup per
	// container; default "hutch". Two hutchd on one host need different ones.
	CgroupParent string
}

// Runtime drives runc. It is safe for concurrent use on different container IDs.
type Runtime struct {
	binary    string
	root      string
	bundleDir string
	// spec builds the OCI specs (host facts, cgroup parent: see Config.CgroupParent).
	spec ocispec.Builder
	log  *slog.Logger
}

var (
	_ runtime.Runtime = (*Runtime)(nil)
	_ runtime.Adopter = (*Runtime)(nil)
)

// New checks cfg, creates Root and BundleDir (0700), finds the runc binary and probes the host
// (cgroup version, swap accounting, cgroup namespaces, rlimits). log receives one line per
// container operation.
func New(cfg Config, log *slog.Logger) (*Runtime, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Root == "" || cfg.BundleDir == "" {
		return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "runc: Root and BundleDir are required")
	}
	bin := cfg.Binary
	if bin == "" {
		bin = "runc"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, errdefs.Newf(errdefs.CodeUnavailable, "runc: binary %q not found: %w", bin, err)
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("runc: %w", err)
	}
	bundles, err := filepath.Abs(cfg.BundleDir)
	if err != nil {
		return nil, fmt.Errorf("runc: %w", err)
	}
	for _, d := range []string{root, bundles} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("runc: %w", err)
		}
	}
	host, err := ocispec.ProbeHost()
	if err != nil {
		return nil, err
	}
	parent := cfg.CgroupParent
	if parent == "" {
		parent = "hutch"
	}
	if ocispec.CheckID(parent) != nil {
		return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "runc: cgroup parent %q must be 1-63 of [a-z0-9-]", parent)
	}
	return &Runtime{binary: path, root: root, bundleDir: bundles, spec: ocispec.Builder{Host: host, CgroupParent: parent}, log: log}, nil
}

// Name returns "runc".
func (r *Runtime) Name() string { return "runc" }

func checkID(id string) error { return ocispec.CheckID(id) }

// BuildSpec turns a runtime.Spec into the OCI spec written to the bundle (see
// ocispec.Builder.Build).
func (r *Runtime) BuildSpec(s runtime.Spec) (*specs.Spec, error) { return r.spec.Build(s) }

func (r *Runtime) bundle(id string) string { return filepath.Join(r.bundleDir, id) }

// command builds a runc invocation with the global flags.
func (r *Runtime) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, r.binary, append([]string{"--root", r.root}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// runcError is runc's stderr for a failed invocation, classified.
func runcError(op, id string, err error, stderr string) error {
	msg := lastErrorLine(stderr)
	if msg == "" {
		msg = err.Error()
	}
	class := errdefs.ErrInternal
	switch low := strings.ToLower(msg); {
	case strings.Contains(low, "does not exist"):
		class = errdefs.ErrNotFound
	case strings.Contains(low, "already exists"), strings.Contains(low, "id already in use"):
		class = errdefs.ErrAlreadyExists
	case strings.Contains(low, "not running"), strings.Contains(low, "not stopped"), strings.Contains(low, "is paused"), strings.Contains(low, "not paused"):
		class = errdefs.ErrFailedPrecondition
	}
	return fmt.Errorf("runc %s %s: %s: %w", op, id, msg, errors.Join(class, err))
}

// lastErrorLine extracts the message of runc's last error line. runc prints either logrus text
// (time="…" level=error msg="…") or, with --log-format json, {"level":"error","msg":"…"}.
func lastErrorLine(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" {
			continue
		}
		if m := logrusMsg.FindStringSubmatch(l); m != nil {
			return strings.ReplaceAll(m[1], `\"`, `"`)
		}
		if m := jsonMsg.FindStringSubmatch(l); m != nil {
			return strings.ReplaceAll(m[1], `\"`, `"`)
		}
		return l
	}
	return ""
}

var (
	logrusMsg = regexp.MustCompile(`msg="((?:[^"\\]|\\.)*)"`)
	jsonMsg   = regexp.MustCompile(`"msg":"((?:[^"\\]|\\.)*)"`)
)

// runSimple runs a short runc command, returning stdout, or a classified error.
func (r *Runtime) runSimple(ctx context.Context, op, id string, args ...string) ([]byte, error) {
	cmd := r.command(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("runc %s %s: %w", op, id, errors.Join(errdefs.ErrDeadlineExceeded, ctx.Err()))
		}
		return nil, runcError(op, id, err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// exitCode returns the exit status of a finished command, or -1 when it did not exit normally.
// A process killed by signal N reports 128+N, as a shell does.
func exitCode(err error) int {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return -1
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}
