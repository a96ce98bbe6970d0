package main

// The lifecycle headline, `go run ./test/bench -headline`: one run on real input.
//
//	(a) a new sandbox, GitCheckout of a Node project (testdata/headline: axios's dependencies
//	    and devDependencies, with a lock file) from a git server on the host, `npm ci` from the
//	    npm registry through the egress proxy; sizes of node_modules;
//	(b) CreateBackup of the project directory, against `tar c | zstd` of the same tree on the
//	    host (over the sandbox's upper directory) and `tar c` inside the sandbox;
//	(c) RestoreBackup into a fresh sandbox until `node -e "require(...)"` runs there, with the
//	    backup's tree not cached on the host (fetched from the blob store and extracted) and
//	    cached, against `zstd -d | tar x` of the baseline archive on the host;
//	(d) Snapshot of the sandbox; new sandboxes from the snapshot (the layer cached, and fetched
//	    from the blob store after hutchd is restarted without it); 4 sandboxes from the
//	    snapshot and Fork(4) (snapshot + 4 forks), until each fork reads a file of
//	    node_modules.
//
// It prints every time, the ratios, the reference's headline for context and the goals of the
// issue, MET or MISSED.

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/daemontest"
	"github.com/hutchdev/hutch/internal/gitservetest"
)

//go:embed all:testdata/headline
var headlineProject embed.FS

const (
	hlRepo    = "headline-project.git"
	hlGitHost = "git.internal"       // hutchd upstream name of the git server
	hlParent  = "/workspace"         // the project's parent directory in the sandbox
	hlDir     = "/workspace/project" // the project
	// hlFirstCmd is the first command after a restore: it uses a file of node_modules.
	hlFirstCmd = "wc -c < node_modules/express/index.js"
	// hlNodeCmd loads modules from node_modules (timed after restores, for context: node's own
	// start takes most of it).
	hlNodeCmd = `node -e "require('express')"`
	// hlReadCmd is what each fork answers: it reads a 9 MB file of node_modules.
	hlReadCmd = "wc -c < node_modules/typescript/lib/typescript.js"
	hlForks   = 4

	// The reference's headline (Cloudflare's sandbox SDK, cloudflare-sandbox-api.md), quoted.
	refStartCloneInstall = 30 * time.Second
	refRestore           = 2 * time.Second

	// The targets each figure is judged against.
	goalRestoreCached = 200 * time.Millisecond
	goalRestoreBlob   = 1500 * time.Millisecond
	goalBackup        = 1500 * time.Millisecond
	goalFork4         = 500 * time.Millisecond
)

// headline holds one headline run's state and results.
type headline struct {
	cfg   config
	d     *daemontest.Daemon
	c     *client.Client
	opts  *client.SandboxOptions
	tag   string
	work  string
	srcID string // the sandbox of step (a)

	// (a)
	create, clone, npmCI time.Duration
	nmBytes, nmFiles     int64 // node_modules: du -sb, find | wc -l
	projBytes, projFiles int64 // the whole project directory
	npmCacheBytes        int64 // npm's cache in the sandbox (part of its disk, so of snapshots)
	upperBytes           int64 // the sandbox's whole upper directory on the host
	// (b)
	backup, hostTar, sbTar series
	backupID               string
	backupBytes, tarBytes  int64
	archive                string // a host baseline archive, for the extraction baseline
	// (c)
	rsCreate               series
	rsBlobCall, rsBlob     series // tree not cached: RestoreBackup; RestoreBackup → first command
	rsCachedCall, rsCached series // tree cached: the same
	rsCachedTotal          series // tree cached: create + RestoreBackup → first command
	rsNode                 series // hlNodeCmd right after a restore (tree cached)
	hostUntar, shmUntar    series
	// (d)
	snapshot                 time.Duration
	snapID                   string
	snapBytes, snapTarBytes  int64
	firstCmd                 series // hlFirstCmd in the source sandbox: the command's own cost
	fromSnap                 series // new sandbox from the snapshot → first command, layer cached
	fromSnapCreate           series // the create call alone
	fromBlob                 time.Duration
	fromBlobCreate           time.Duration
	fork4                    series // 4 sandboxes from the snapshot → each read a file
	forkAPI                  time.Duration
	forkAPISnap, forkAPIFork float64 // server-side milliseconds
}

// runHeadline is the -headline mode: setup like run (its own hutchd, the default image) plus
// the git server, then the steps, then the report.
func runHeadline(ctx context.Context, cfg config, out io.Writer) (err error) {
	it, _, work, cleanup, err := setup(cfg, "hutch-bench-headline-", "runc", "nft", "go", "git", "tar", "zstd", "du")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup()) }()

	bins := work + "/bin" // built by setup
	proj, err := fs.Sub(headlineProject, "testdata/headline")
	if err != nil {
		return err
	}
	git, err := gitservetest.Serve(ctx, proj, hlRepo, "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer git.Close()
	progress("git server: %s (the sandbox sees http://%s/%s)", git.URL(), hlGitHost, hlRepo)

	progress("starting hutchd")
	d, err := startDaemon(ctx, bins, work, cfg.imagesDir, "--upstream", hlGitHost+"="+git.Addr())
	if err != nil {
		return err
	}
	h := &headline{cfg: cfg, d: d, tag: randomTag(), work: work,
		opts: &client.SandboxOptions{InstanceType: it.Name, KeepAlive: true}}
	h.srcID = "hl-" + h.tag + "-src"
	defer func() {
		err = stopDaemon(ctx, cfg, h.d, 5*time.Minute, err)
		if cerr := removeCgroupParents(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	h.c = d.Client()
	img, err := ensureImage(ctx, h.c, cfg.imagesDir)
	if err != nil {
		return err
	}
	start, load0 := time.Now(), loadavg()
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"(a) checkout and npm ci", h.install},
		{"(b) backup", h.backupStep},
		{"(c) restore", h.restoreStep},
		{"(d) snapshot and forks", h.snapshotStep},
		{"(d) sandbox from the blob store", h.fromBlobStep},
	}
	for _, s := range steps {
		progress("%s", s.name)
		if err := s.fn(ctx); err != nil {
			return interrupted(ctx, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	h.report(out, it, img, time.Since(start), load0+" at the start, "+loadavg()+" at the end")
	return nil
}

// loadavg is the host's 1, 5 and 15 minute load averages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// removeCgroupParents removes the benchmark hutchd's parent cgroup ("hutchbench" in every
// hierarchy) once hutchd has stopped; rmdir only removes empty cgroups, so a cgroup still in
// use stays and is reported.
func removeCgroupParents() error {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroupParent)
	dirs = append(dirs, "/sys/fs/cgroup/"+cgroupParent)
	var errs []error
	for _, d := range dirs {
		if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
			errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// upper is the host path of sandbox id's upper directory (its own writes): on its disk image's
// mount (disk/) when it has one, else in its directory.
func (h *headline) upper(id string) string {
	dir := filepath.Join(h.d.StateDir, "data", "sandboxes", id)
	if _, err := os.Stat(filepath.Join(dir, "disk.img")); err == nil {
		return filepath.Join(dir, "disk", "upper")
	}
	return filepath.Join(dir, "upper")
}

// timed runs fn and returns how long it took.
func timed(fn func() error) (time.Duration, error) {
	t0 := time.Now()
	err := fn()
	return time.Since(t0), err
}

// destroy removes sandbox id (untimed cleanup between iterations).
func (h *headline) destroy(ctx context.Context, ids ...string) error {
	var errs []error
	for _, id := range ids {
		if err := h.c.SandboxHandle(id).Destroy(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
