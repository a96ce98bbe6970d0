package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/rootfs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/runc"
)

// rawRunc runs the baselines: containers of the same image, with the same runc spec generation
// (runc.Runtime.BuildSpec) and the same resources as the sandboxes, driven straight through the
// runc binary, without hutchd, networking, an agent or a shell.
type rawRunc struct {
	rt        *runc.Runtime
	binary    string // runc executable
	root      string // runc --root
	bundleDir string // the Runtime's BundleDir: <bundleDir>/<id>/config.json
	disks     string // <disks>/<id>/{upper,work,rootfs}
	lower     string // the image's root filesystem
	res       runtime.Resources

	live map[string]bool // containers and mounts not yet cleaned up, by ID
}

func newRawRunc(work, lower string, res runtime.Resources) (*rawRunc, error) {
	bin, err := exec.LookPath("runc")
	if err != nil {
		return nil, err
	}
	r := &rawRunc{
		binary:    bin,
		root:      filepath.Join(work, "raw", "runc"),
		bundleDir: filepath.Join(work, "raw", "bundles"),
		disks:     filepath.Join(work, "raw", "disks"),
		lower:     lower,
		res:       res,
		live:      map[string]bool{},
	}
	r.rt, err = runc.New(runc.Config{Binary: bin, Root: r.root, BundleDir: r.bundleDir, CgroupParent: "hutchbench"}, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (r *rawRunc) merged(id string) string { return filepath.Join(r.disks, id, "rootfs") }

// mount overlay-mounts the image with fresh upper and work directories for container id.
func (r *rawRunc) mount(id string) error {
	r.live[id] = true
	d := filepath.Join(r.disks, id)
	return rootfs.Mount(r.lower, filepath.Join(d, "upper"), filepath.Join(d, "work"), r.merged(id))
}

func (r *rawRunc) spec(id string, args ...string) runtime.Spec {
	return runtime.Spec{ID: id, RootFS: r.merged(id), Args: args, Resources: r.res}
}

// runTrue is one cold "raw runc" iteration: mount the image, write the bundle, foreground
// `runc run` of /bin/true (which creates, starts, waits for and deletes the container), unmount.
// run is the `runc run` invocation alone; total also has the mount, bundle and unmount.
func (r *rawRunc) runTrue(ctx context.Context, id string) (run, total time.Duration, err error) {
	start := time.Now()
	if err := r.mount(id); err != nil {
		return 0, 0, err
	}
	oci, err := r.rt.BuildSpec(r.spec(id, "/bin/true"))
	if err != nil {
		return 0, 0, err
	}
	bundle := filepath.Join(r.bundleDir, id)
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		return 0, 0, err
	}
	b, err := json.Marshal(oci)
	if err != nil {
		return 0, 0, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		return 0, 0, err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, r.binary, "--root", r.root, "run", "--bundle", bundle, id)
	cmd.Stderr = &stderr
	runStart := time.Now()
	err = cmd.Run()
	run = time.Since(runStart)
	if err != nil {
		return 0, 0, fmt.Errorf("runc run %s: %w: %s", id, err, strings.TrimSpace(stderr.String()))
	}
	if err := rootfs.Unmount(r.merged(id)); err != nil {
		return 0, 0, err
	}
	total = time.Since(start)
	return run, total, r.cleanup(ctx, id)
}

// startLong starts a detached container whose PID 1 sleeps forever, for the exec baseline.
func (r *rawRunc) startLong(ctx context.Context, id string) error {
	if err := r.mount(id); err != nil {
		return err
	}
	_, err := r.rt.Start(ctx, r.spec(id, "sleep", "infinity"))
	return err
}

// execTrue is `runc exec <id> true` in a running container.
func (r *rawRunc) execTrue(ctx context.Context, id string) error {
	code, err := r.rt.Exec(ctx, id, []string{"true"}, nil, nil)
	if err == nil && code != 0 {
		err = fmt.Errorf("runc exec %s true: exit code %d", id, code)
	}
	return err
}

// cleanup deletes container id (if any), its cgroups and bundle, unmounts its root and removes
// its directories. It is idempotent.
func (r *rawRunc) cleanup(ctx context.Context, id string) error {
	errs := []error{r.rt.Delete(ctx, id, true), rootfs.Unmount(r.merged(id))}
	if errs[0] == nil && errs[1] == nil {
		errs = append(errs, os.RemoveAll(filepath.Join(r.disks, id)))
		delete(r.live, id)
	}
	return errors.Join(errs...)
}

// cleanupAll cleans up every container and mount not yet cleaned up.
func (r *rawRunc) cleanupAll() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for id := range r.live {
		errs = append(errs, r.cleanup(ctx, id))
	}
	return errors.Join(errs...)
}
