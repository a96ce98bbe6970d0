package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/daemontest"
)

// Names and ports of the benchmark's hutchd, distinct from a production hutchd and from the
// e2e tests' daemon, so the benchmark can run next to either.
const (
	ifPrefix = "hbn"
	nsPrefix = "hutchbench-"
	nftTable = "hutchbench"
	subnet   = "10.90.0.0/16"
	dnsPort  = "45053"
	httpPort = "45001"
	tlsPort  = "45002"
	// cgroupParent is the cgroup holding the benchmark's sandboxes.
	cgroupParent = "hutchbench"
	// previewListen is the benchmark hutchd's preview listener.
	previewListen = "127.0.0.1:45080"
)

// moduleRoot returns the directory of the module's go.mod (the repository root).
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the hutch module: run from the repository (go run ./test/bench)")
	}
	return filepath.Dir(mod), nil
}

// startDaemon starts the benchmark's hutchd with a private state dir under work and its own
// names and ports (and the further flags extra), and waits for its API.
func startDaemon(ctx context.Context, bins, work, imagesDir string, extra ...string) (*daemontest.Daemon, error) {
	d, err := daemontest.New(bins, filepath.Join(work, "state"), filepath.Join(work, "hutchd.log"))
	if err != nil {
		return nil, err
	}
	d.Args = []string{
		"--images-dir", imagesDir,
		"--if-prefix", ifPrefix,
		"--netns-prefix", nsPrefix,
		"--nft-table", nftTable,
		"--cgroup-parent", cgroupParent,
		"--subnet", subnet,
		"--dns-port", dnsPort,
		"--http-port", httpPort,
		"--tls-port", tlsPort,
		"--preview-listen", previewListen,
		"--log-level", "debug",
		"--data-volume-size", "16G",
	}
	d.Args = append(d.Args, extra...)
	return d, d.Start(ctx)
}

// stopDaemon is every mode's clean-up of d, run deferred with the mode's error runErr: it
// destroys the sandboxes (within destroyTimeout), stops hutchd, unmounts its data volume, and
// points at hutchd's log (kept with -keep-work, or its tail when the run failed). It returns
// runErr joined with what the clean-up met.
func stopDaemon(ctx context.Context, cfg config, d *daemontest.Daemon, destroyTimeout time.Duration, runErr error) error {
	progress("cleaning up")
	err := runErr
	dctx, cancel := context.WithTimeout(context.Background(), destroyTimeout)
	defer cancel()
	if derr := d.DestroyAll(dctx); derr != nil {
		err = errors.Join(err, fmt.Errorf("destroy sandboxes: %w", derr))
	}
	d.Stop()
	if uerr := d.UnmountData(); uerr != nil {
		err = errors.Join(err, uerr)
	}
	switch {
	case cfg.keepWork:
		progress("hutchd log: %s", d.LogPath)
	case err != nil && ctx.Err() == nil:
		progress("hutchd log (tail):\n%s", d.LogTail())
	}
	return err
}
