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
	"context"
	"log/slog"
	"regexp"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/ocicli"
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
	cli *ocicli.Driver
	log *slog.Logger
}

var (
	_ runtime.Runtime = (*Runtime)(nil)
	_ runtime.Adopter = (*Runtime)(nil)
)

// cliConfig is the ocicli configuration of runc for cfg.
func cliConfig(cfg Config) ocicli.Config {
	return ocicli.Config{
		Name: "runc", Binary: cfg.Binary, Root: cfg.Root, BundleDir: cfg.BundleDir, CgroupParent: cfg.CgroupParent,
		Message: lastErrorLine,
		Classes: []ocicli.Class{
			{Err: errdefs.ErrNotFound, Text: []string{"does not exist"}},
			{Err: errdefs.ErrAlreadyExists, Text: []string{"already exists", "id already in use"}},
			{Err: errdefs.ErrFailedPrecondition, Text: []string{"not running", "not stopped", "is paused", "not paused"}},
		},
	}
}

// New checks cfg, creates Root and BundleDir (0700), finds the runc binary and probes the host
// (cgroup version, swap accounting, cgroup namespaces, rlimits). log receives one line per
// container operation.
func New(cfg Config, log *slog.Logger) (*Runtime, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cli, err := ocicli.New(cliConfig(cfg), log)
	if err != nil {
		return nil, err
	}
	return &Runtime{cli: cli, log: log}, nil
}

// Name returns "runc".
func (r *Runtime) Name() string { return "runc" }

// Features returns none: runc hands PID 1 inherited files and its kernel enforces the memory
// limit.
func (r *Runtime) Features() runtime.Features { return runtime.Features{} }

func checkID(id string) error { return ocispec.CheckID(id) }

// BuildSpec turns a runtime.Spec into the OCI spec written to the bundle (see
// ocispec.Builder.Build).
func (r *Runtime) BuildSpec(s runtime.Spec) (*specs.Spec, error) { return r.cli.Spec().Build(s) }

func (r *Runtime) bundle(id string) string { return r.cli.Bundle(id) }

// runcError is runc's stderr for a failed invocation, classified.
func runcError(op, id string, err error, stderr string) error {
	return cliConfig(Config{}).Error(op, id, err, stderr)
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
	return r.cli.Run(ctx, op, id, args...)
}
