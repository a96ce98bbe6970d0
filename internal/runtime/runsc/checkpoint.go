package runsc

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

var _ runtime.Checkpointer = (*Runtime)(nil)

// MinCheckpointVersion is the gVisor module version from which runsc can save a hutch sandbox:
// its host network sockets (--network=host) are saved (listening sockets are bound and
// listening again after a restore, connections are reset: the Sentry's
// pkg/sentry/socket/hostinet/save_restore.go). It is the version scripts/host-setup.sh
// installs; older releases, such as Debian's 20221219, refuse with "checkpoint not supported
// when using hostinet".
const MinCheckpointVersion = "v0.0.0-20260905035102-160fafc42237"

// CheckpointSupport returns nil when the runsc binary was built from gvisor.dev/gvisor at
// MinCheckpointVersion's date or later (read from the binary's Go build information), else
// errdefs.ErrFailedPrecondition naming what was found.
func (r *Runtime) CheckpointSupport() error {
	return r.checkpointSupport
}

// ProbeCheckpoint answers CheckpointSupport for the runsc binary at path, from its Go build
// information (its gvisor.dev/gvisor module version).
func ProbeCheckpoint(path string) error {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("runsc %s has no Go build information (%v), so whether it saves host network sockets is unknown; memory snapshots need runsc %s or later (scripts/host-setup.sh): %w", path, err, MinCheckpointVersion, errdefs.ErrFailedPrecondition)
	}
	version := ""
	if info.Main.Path == "gvisor.dev/gvisor" {
		version = info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == "gvisor.dev/gvisor" {
			version = d.Version
		}
	}
	have, ok := pseudoVersionTime(version)
	want, _ := pseudoVersionTime(MinCheckpointVersion)
	if !ok || have < want {
		if version == "" {
			version = "an unknown version"
		}
		return fmt.Errorf("runsc %s is %s, which cannot save host network sockets; memory snapshots need runsc %s or later (scripts/host-setup.sh): %w", path, version, MinCheckpointVersion, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// pseudoVersionTime is the timestamp (yyyymmddhhmmss) of a Go pseudo-version such as
// v0.0.0-20260905035102-160fafc42237.
func pseudoVersionTime(v string) (string, bool) {
	parts := strings.Split(v, "-")
	if len(parts) < 3 {
		return "", false
	}
	ts := parts[len(parts)-2]
	if i := strings.LastIndexByte(ts, '.'); i >= 0 { // vX.Y.Z-pre.0.yyyymmddhhmmss-hash
		ts = ts[i+1:]
	}
	if len(ts) != 14 {
		return "", false
	}
	if _, err := strconv.ParseUint(ts, 10, 64); err != nil {
		return "", false
	}
	return ts, true
}

// Checkpoint saves the whole sandbox (every task's memory, registers, open files, the Sentry's
// kernel state) into dir with `runsc checkpoint --image-path dir`; the container is stopped
// afterwards and must still be deleted (Delete). dir is created (0700) if missing and must be
// empty. Errors: errdefs.ErrNotFound (unknown ID), errdefs.ErrFailedPrecondition (not
// running), errdefs.ErrInternal with runsc's message (a state gVisor cannot save, such as a
// host-backed socket the Sentry cannot serialise: "checkpoint not supported when using
// hostinet", "Cannot save endpoint with bound host socket"). On error the container may still
// run (a refusal found before saving) or be stopped (the Sentry's save failed half-way).
func (r *Runtime) Checkpoint(ctx context.Context, id, dir string) error {
	if err := ocispec.CheckID(id); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("runsc checkpoint %s: %w", id, err)
	}
	logPath := filepath.Join(r.bundle(id), "runsc-checkpoint.log")
	started := time.Now()
	cmd := r.cli.Command(ctx, "--log", logPath, "checkpoint", "--image-path", dir, r.cli.CLIID(id))
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("runsc checkpoint %s: %w", id, errors.Join(errdefs.ErrDeadlineExceeded, ctx.Err()))
		}
		logText, _ := os.ReadFile(logPath)
		msg := errorLines(string(logText))
		if msg == "" {
			msg = string(out)
		}
		return r.cli.Error("checkpoint", id, err, checkpointReason(msg))
	}
	r.log.Info("container checkpointed", "sandbox_id", id, "image", dir, "took", time.Since(started).Round(time.Microsecond))
	return nil
}

// Restore starts spec's container from the image Checkpoint wrote in dir (`runsc restore
// --detach`): its processes continue where they were. spec must describe the same container
// as at checkpoint (same mounts, same network namespace path; the root file system mounted
// again with the same contents); the old container must be deleted first. The bundle is
// rewritten from spec. Errors as Start's; on error nothing of the container is left behind.
func (r *Runtime) Restore(ctx context.Context, spec runtime.Spec, dir string) (runtime.State, error) {
	if dir == "" {
		return runtime.State{}, fmt.Errorf("runsc restore %s: no image directory: %w", spec.ID, errdefs.ErrNotFound)
	}
	return r.launch(ctx, spec, dir)
}

// checkpointReason shortens a failed checkpoint's message to its first line, without the dump
// of the Sentry object that could not be saved: a panic in gVisor's state encoder reads
// `checkpoint failed: …: encoding error at object T{…}: <reason>:` followed by a stack trace.
func checkpointReason(msg string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	if head, _, ok := strings.Cut(first, "encoding error at object"); ok {
		if i := strings.LastIndex(first, "}: "); i >= 0 {
			first = head + strings.TrimSuffix(strings.TrimSpace(first[i+3:]), ":")
		}
	}
	return first
}
