// Package ocicli drives a runc-compatible runtime binary (runc, gVisor's runsc) from the
// command line: it finds the binary, owns the state directory (--root) and the bundle
// directories, runs its commands with the global flags, classifies their errors, and
// implements the parts of the runtime.Runtime contract that are the same for every such
// binary (State, List, Kill, Delete, the cgroup sweep). internal/runtime/runc and
// internal/runtime/runsc are configurations of one Driver, plus what only their binary does.
//
// A Driver keeps no container state in memory: a restarted hutchd finds its containers with
// List. Errors from the binary are classified by its stderr text (Config.Classes): the text
// is an external tool's, so matching it is the only way to classify it; anything unmatched is
// errdefs.ErrInternal.
package ocicli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// Config configures a Driver.
type Config struct {
	// Name is the binary's name: the default Binary, and the prefix of every error ("runc").
	Name string
	// Binary is the executable: a path, or a name looked up on PATH. Empty means Name.
	Binary string
	// InstallHint is added to the error for a missing binary (" (apt-get install runsc)").
	InstallHint string
	// Root is the binary's state directory (--root). Required.
	Root string
	// BundleDir holds one bundle directory per container (<BundleDir>/<id>/config.json).
	// Required.
	BundleDir string
	// CgroupParent is the cgroup (below each hierarchy's root) that holds one cgroup per
	// container; default "hutch".
	CgroupParent string
	// GlobalFlags, if set, returns the flags given after --root on every invocation, for the
	// binary found at path (it may ask the binary which flags it knows). Its error ends New.
	GlobalFlags func(path string) ([]string, error)
	// IDSuffix is added to each container ID on the binary's command line and removed from
	// the IDs it lists (runsc: see runsc's runscID).
	IDSuffix string
	// Message extracts the message of a failed command from its stderr; nil: LastLine.
	Message func(stderr string) string
	// Classes classify a failed command's message: the first class with a substring of the
	// lower-cased message is the error's; none: errdefs.ErrInternal.
	Classes []Class
	// SweepRetry reports whether a forced delete that failed with err may be finished by a
	// sweep of the container's cgroups and a second delete; nil: errdefs.ErrInternal only.
	SweepRetry func(err error) bool
}

// Class is an error class and the texts of the binary's messages that have it.
type Class struct {
	Err  error
	Text []string
}

// Driver runs one runc-compatible binary. It is safe for concurrent use on different container
// IDs.
type Driver struct {
	cfg       Config // as given, for Error; Name, IDSuffix and SweepRetry
	name      string
	binary    string
	root      string
	bundleDir string
	flags     []string
	idSuffix  string
	retry     func(error) bool
	// spec builds the OCI specs (host facts, cgroup parent).
	spec ocispec.Builder
	log  *slog.Logger
}

// New checks cfg, creates Root and BundleDir (0700), finds the binary and probes the host
// (cgroup version, swap accounting, cgroup namespaces, rlimits). A missing binary gives
// errdefs.ErrUnavailable; bad fields give errdefs.ErrInvalidArgument. log receives one line per
// container operation.
func New(cfg Config, log *slog.Logger) (*Driver, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Root == "" || cfg.BundleDir == "" {
		return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "%s: Root and BundleDir are required", cfg.Name)
	}
	bin := cfg.Binary
	if bin == "" {
		bin = cfg.Name
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, errdefs.Newf(errdefs.CodeUnavailable, "%s: binary %q not found%s: %w", cfg.Name, bin, cfg.InstallHint, err)
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	bundles, err := filepath.Abs(cfg.BundleDir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	for _, d := range []string{root, bundles} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Name, err)
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
		return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "%s: cgroup parent %q must be 1-63 of [a-z0-9-]", cfg.Name, parent)
	}
	var flags []string
	if cfg.GlobalFlags != nil {
		if flags, err = cfg.GlobalFlags(path); err != nil {
			return nil, err
		}
	}
	retry := cfg.SweepRetry
	if retry == nil {
		retry = func(err error) bool { return errors.Is(err, errdefs.ErrInternal) }
	}
	return &Driver{
		cfg: cfg, name: cfg.Name, binary: path, root: root, bundleDir: bundles, flags: flags, idSuffix: cfg.IDSuffix,
		retry: retry,
		spec:  ocispec.Builder{Host: host, CgroupParent: parent}, log: log,
	}, nil
}

// Name is the binary's name (Config.Name).
func (d *Driver) Name() string { return d.name }

// Binary is the absolute path of the binary.
func (d *Driver) Binary() string { return d.binary }

// Root is the absolute path of the binary's state directory.
func (d *Driver) Root() string { return d.root }

// Bundle is the bundle directory of container id.
func (d *Driver) Bundle(id string) string { return filepath.Join(d.bundleDir, id) }

// Spec is the builder of the OCI specs of the containers.
func (d *Driver) Spec() ocispec.Builder { return d.spec }

// Log is the driver's logger.
func (d *Driver) Log() *slog.Logger { return d.log }

// CLIID is the ID the binary knows container id by (Config.IDSuffix).
func (d *Driver) CLIID(id string) string { return id + d.idSuffix }

// Command builds an invocation of the binary with the global flags.
func (d *Driver) Command(ctx context.Context, args ...string) *exec.Cmd {
	global := append([]string{"--root", d.root}, d.flags...)
	cmd := exec.CommandContext(ctx, d.binary, append(global, args...)...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Error is the binary's stderr for a failed invocation of op on id, classified (Config.Error).
func (d *Driver) Error(op, id string, err error, stderr string) error {
	return d.cfg.Error(op, id, err, stderr)
}

// Error is the binary's stderr for a failed invocation of op on id, classified by c.Message
// and c.Classes.
func (c Config) Error(op, id string, err error, stderr string) error {
	message := c.Message
	if message == nil {
		message = LastLine
	}
	msg := message(stderr)
	if msg == "" {
		msg = err.Error()
	}
	class := errdefs.ErrInternal
	low := strings.ToLower(msg)
classes:
	for _, cl := range c.Classes {
		for _, t := range cl.Text {
			if strings.Contains(low, t) {
				class = cl.Err
				break classes
			}
		}
	}
	return fmt.Errorf("%s %s %s: %s: %w", c.Name, op, id, msg, errors.Join(class, err))
}

// Cancelled is the error of op on id when ctx ended (errdefs.ErrDeadlineExceeded).
func (d *Driver) Cancelled(ctx context.Context, op, id string) error {
	return fmt.Errorf("%s %s %s: %w", d.name, op, id, errors.Join(errdefs.ErrDeadlineExceeded, ctx.Err()))
}

// LastLine is the last non-empty line of s, trimmed.
func LastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// Run runs a short command (op on container id, for errors), returning stdout, or a
// classified error.
func (d *Driver) Run(ctx context.Context, op, id string, args ...string) ([]byte, error) {
	cmd := d.Command(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, d.Cancelled(ctx, op, id)
		}
		return nil, d.Error(op, id, err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// OpenStdio opens the files a container's PID 1 inherits: stdin /dev/null, stdout and stderr
// the log at logPath (appended; empty: discarded).
func (d *Driver) OpenStdio(logPath string) (stdin, out *os.File, err error) {
	stdin, err = os.Open(os.DevNull)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", d.name, err)
	}
	if logPath == "" {
		out, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	} else {
		out, err = os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	}
	if err != nil {
		stdin.Close()
		return nil, nil, fmt.Errorf("%s: open container log: %w", d.name, err)
	}
	return stdin, out, nil
}

// ExitCode returns the exit status of a finished command, or -1 when it did not exit normally.
// A process killed by signal N reports 128+N, as a shell does.
func ExitCode(err error) int {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return -1
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

// LockedWriter serialises writes to W with a mutex shared by several writers (a command's
// stdout and stderr are often the same writer).
type LockedWriter struct {
	Mu *sync.Mutex
	W  io.Writer
}

func (l *LockedWriter) Write(p []byte) (int, error) {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	return l.W.Write(p)
}
