package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/client"
)

// run runs command in sandbox sb (cwd hlDir) and returns its stdout; a non-zero exit is an
// error with the output.
func (h *headline) run(ctx context.Context, sb *client.Sandbox, command string) (string, error) {
	res, err := sb.Exec(ctx, command, &client.ExecOptions{Cwd: hlDir, Timeout: 10 * time.Minute})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("%s in %s: exit %d: %s%s", command, sb.ID(), res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout), nil
}

// ints parses whitespace-separated integers.
func ints(s string, n int) ([]int64, error) {
	f := strings.Fields(s)
	if len(f) != n {
		return nil, fmt.Errorf("want %d numbers, got %q", n, s)
	}
	out := make([]int64, n)
	for i, x := range f {
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parse %q: %w", s, err)
		}
		out[i] = v
	}
	return out, nil
}

// host runs a bash command line on the host.
func host(ctx context.Context, command string) (string, error) {
	out, err := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", command).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %w: %s", command, err, out)
	}
	return string(out), nil
}

// install is step (a): a new sandbox, the clone, npm ci, and the sizes.
func (h *headline) install(ctx context.Context) error {
	var sb *client.Sandbox
	var err error
	if h.create, err = timed(func() error {
		sb, err = h.c.Sandbox(ctx, h.srcID, h.opts)
		return err
	}); err != nil {
		return err
	}
	url := "http://" + hlGitHost + "/" + hlRepo
	if h.clone, err = timed(func() error {
		_, err := sb.GitCheckout(ctx, url, &client.GitCheckoutOptions{TargetDir: hlDir, Depth: 1})
		return err
	}); err != nil {
		return err
	}
	progress("$ npm ci (from the npm registry; minutes)")
	var code int
	if h.npmCI, err = timed(func() error {
		code, err = sb.ExecStreamTo(ctx, "npm ci --no-audit --no-fund", &client.ExecOptions{Cwd: hlDir, Timeout: 30 * time.Minute}, os.Stderr, os.Stderr)
		return err
	}); err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("npm ci exited with %d", code)
	}
	out, err := h.run(ctx, sb, `du -sb node_modules | cut -f1; find node_modules | wc -l; du -sb . | cut -f1; find . | wc -l; du -sb "$(npm config get cache)" | cut -f1`)
	if err != nil {
		return err
	}
	v, err := ints(out, 5)
	if err != nil {
		return err
	}
	h.nmBytes, h.nmFiles, h.projBytes, h.projFiles, h.npmCacheBytes = v[0], v[1], v[2], v[3], v[4]
	out, err = host(ctx, "du -sb "+h.upper(h.srcID)+" | cut -f1")
	if err != nil {
		return err
	}
	if v, err = ints(out, 1); err != nil {
		return err
	}
	h.upperBytes = v[0]
	progress("node_modules: %.1f MiB in %d entries; npm ci took %s", mib(h.nmBytes), h.nmFiles, h.npmCI.Round(time.Millisecond))
	return nil
}

// backupStep is step (b): CreateBackup of the project, against tar c | zstd of the same tree
// on the host and tar c inside the sandbox, iterations alternating.
func (h *headline) backupStep(ctx context.Context) error {
	h.backup.name = "hutch: CreateBackup(" + hlDir + ")"
	h.hostTar.name = "host: tar c | zstd -1 -T0 > file"
	h.sbTar.name = "in sandbox: tar c | wc -c"
	sb := h.c.SandboxHandle(h.srcID)
	tree := filepath.Join(h.upper(h.srcID), strings.TrimPrefix(hlParent, "/"))
	if _, err := os.Stat(filepath.Join(tree, filepath.Base(hlDir), "package-lock.json")); err != nil {
		return fmt.Errorf("the project is not in the sandbox's upper directory: %w", err)
	}
	for i := range h.cfg.hn {
		b, d, err := h.oneBackup(ctx, sb)
		if err != nil {
			return err
		}
		h.backup.add(d)
		if i == 0 {
			h.backupID, h.backupBytes = b.ID, b.SizeBytes
		} else if err := h.c.DeleteBackup(ctx, b.ID); err != nil {
			return err
		}
		h.archive = filepath.Join(h.work, "baseline.tar.zst")
		os.Remove(h.archive)
		d, err = timed(func() error {
			_, err := host(ctx, fmt.Sprintf("tar -C %s -cf - %s | zstd -1 -T0 -q -o %s", tree, filepath.Base(hlDir), h.archive))
			return err
		})
		if err != nil {
			return err
		}
		h.hostTar.add(d)
		fi, err := os.Stat(h.archive)
		if err != nil {
			return err
		}
		h.tarBytes = fi.Size()
		d, err = timed(func() error {
			_, err := h.run(ctx, sb, fmt.Sprintf("tar -C %s -cf - %s | wc -c", hlParent, filepath.Base(hlDir)))
			return err
		})
		if err != nil {
			return err
		}
		h.sbTar.add(d)
	}
	return nil
}

func (h *headline) oneBackup(ctx context.Context, sb *client.Sandbox) (client.Backup, time.Duration, error) {
	var b client.Backup
	d, err := timed(func() error {
		var err error
		b, err = sb.CreateBackup(ctx, client.BackupOptions{Dir: hlDir})
		return err
	})
	return b, d, err
}

// restoreStep is step (c): fresh sandboxes, RestoreBackup, the first command; -hn times with
// the backup's tree not cached on the host (removed from hutchd's tree cache first: the
// archive comes from the blob store and is extracted), then -hn times with the tree cached;
// then the extraction baselines on the host.
func (h *headline) restoreStep(ctx context.Context) error {
	h.rsCreate.name = "create sandbox"
	h.rsBlobCall.name = "RestoreBackup, tree not cached (from the blob store)"
	h.rsBlob.name = "  RestoreBackup → first command"
	h.rsCachedCall.name = "RestoreBackup, tree cached"
	h.rsCached.name = "  RestoreBackup → first command"
	h.rsCachedTotal.name = "  create + RestoreBackup → first command"
	h.rsNode.name = "  then " + hlNodeCmd
	treeDir := filepath.Join(h.d.StateDir, "data", "backup-trees", h.backupID)
	for i := range 2 * h.cfg.hn {
		cached := i >= h.cfg.hn
		if !cached {
			if err := os.RemoveAll(treeDir); err != nil {
				return err
			}
		}
		id := fmt.Sprintf("hl-%s-restore-%d", h.tag, i)
		var sb *client.Sandbox
		var err error
		t0 := time.Now()
		create, err := timed(func() error {
			sb, err = h.c.Sandbox(ctx, id, h.opts)
			return err
		})
		if err != nil {
			return err
		}
		h.rsCreate.add(create)
		t1 := time.Now()
		var r client.RestoreResult
		call, err := timed(func() error {
			r, err = sb.RestoreBackup(ctx, h.backupID, "")
			return err
		})
		if err != nil {
			return err
		}
		if r.Mode != "mount" {
			return fmt.Errorf("restore used mode %q, want mount", r.Mode)
		}
		if _, err := h.run(ctx, sb, hlFirstCmd); err != nil {
			return err
		}
		if cached {
			h.rsCachedCall.add(call)
			h.rsCached.add(time.Since(t1))
			h.rsCachedTotal.add(time.Since(t0))
			d, err := timed(func() error { _, err := h.run(ctx, sb, hlNodeCmd); return err })
			if err != nil {
				return err
			}
			h.rsNode.add(d)
		} else {
			h.rsBlobCall.add(call)
			h.rsBlob.add(time.Since(t1))
		}
		// The restored tree is complete (untimed).
		out, err := h.run(ctx, sb, "find node_modules | wc -l")
		if err != nil {
			return err
		}
		if n, err := ints(out, 1); err != nil || n[0] != h.nmFiles {
			return fmt.Errorf("restored node_modules has %q entries, want %d (%v)", strings.TrimSpace(out), h.nmFiles, err)
		}
		if err := h.destroy(ctx, id); err != nil {
			return err
		}
	}

	h.hostUntar.name = "host: zstd -d | tar x, onto the data volume"
	dst := filepath.Join(h.d.StateDir, "data", "bench-untar")
	for range h.cfg.hn {
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
		if err := os.Mkdir(dst, 0o700); err != nil {
			return err
		}
		d, err := timed(func() error {
			_, err := host(ctx, fmt.Sprintf("zstd -d -c -q %s | tar -x -C %s", h.archive, dst))
			return err
		})
		if err != nil {
			return err
		}
		h.hostUntar.add(d)
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	// The same into tmpfs: the extraction's CPU cost without the disk's.
	h.shmUntar.name = "host: zstd -d | tar x into tmpfs (/dev/shm)"
	shm := "/dev/shm/hutch-bench-" + h.tag
	for range h.cfg.hn {
		if err := os.RemoveAll(shm); err != nil {
			return err
		}
		if err := os.Mkdir(shm, 0o700); err != nil {
			return err
		}
		d, err := timed(func() error {
			_, err := host(ctx, fmt.Sprintf("zstd -d -c -q %s | tar -x -C %s", h.archive, shm))
			return err
		})
		if rerr := os.RemoveAll(shm); err == nil {
			err = rerr
		}
		if err != nil {
			return err
		}
		h.shmUntar.add(d)
	}
	return nil
}

// snapshotStep is step (d): Snapshot, sandboxes from it (one, then 4 at once) until they use
// node_modules, then Fork(4) (a new snapshot and 4 forks in one call).
func (h *headline) snapshotStep(ctx context.Context) error {
	src := h.c.SandboxHandle(h.srcID)
	var snap *client.SnapshotInfo
	var err error
	if h.snapshot, err = timed(func() error {
		snap, err = src.Snapshot(ctx)
		return err
	}); err != nil {
		return err
	}
	h.snapID, h.snapBytes = snap.ID, snap.SizeBytes
	for _, l := range snap.Layers {
		h.snapTarBytes += l.SizeBytes
	}

	h.firstCmd.name = "first command in the source sandbox (baseline)"
	for range h.cfg.hn {
		d, err := timed(func() error {
			_, err := h.run(ctx, src, hlFirstCmd)
			return err
		})
		if err != nil {
			return err
		}
		h.firstCmd.add(d)
	}
	h.fromSnap.name = "sandbox from snapshot → first command"
	h.fromSnapCreate.name = "  of which: create from snapshot"
	h.fork4.name = fmt.Sprintf("%d sandboxes from snapshot → each reads", hlForks)
	for i := range h.cfg.hn {
		id := fmt.Sprintf("hl-%s-snap-%d", h.tag, i)
		d, created, err := h.fromSnapshot(ctx, id, hlFirstCmd)
		if err != nil {
			return err
		}
		h.fromSnap.add(d)
		h.fromSnapCreate.add(created)
		if err := h.destroy(ctx, id); err != nil {
			return err
		}

		ids := make([]string, hlForks)
		for j := range ids {
			ids[j] = fmt.Sprintf("hl-%s-f%d-%d", h.tag, i, j)
		}
		d, err = h.parallel(ctx, ids, func(ctx context.Context, id string) error {
			_, _, err := h.fromSnapshot(ctx, id, hlReadCmd)
			return err
		})
		if err != nil {
			return err
		}
		h.fork4.add(d)
		if err := h.destroy(ctx, ids...); err != nil {
			return err
		}
	}

	// Fork(4): snapshot + forks in one call, then each fork reads.
	var res *client.ForkResult
	prefix := "hl-" + h.tag + "-fork"
	t0 := time.Now()
	if res, err = src.Fork(ctx, hlForks, &client.ForkOptions{Prefix: prefix}); err != nil {
		return err
	}
	ids := make([]string, len(res.Sandboxes))
	for i, f := range res.Sandboxes {
		ids[i] = f.ID
	}
	if _, err := h.parallel(ctx, ids, func(ctx context.Context, id string) error {
		_, err := h.checkRead(ctx, h.c.SandboxHandle(id))
		return err
	}); err != nil {
		return err
	}
	h.forkAPI = time.Since(t0)
	h.forkAPISnap, h.forkAPIFork = res.SnapshotMs, res.ForkMs
	return h.destroy(ctx, ids...)
}

// fromSnapshot creates sandbox id from the snapshot and runs command in it; it returns the
// time from the create call to the command's end, and to the create call's end.
func (h *headline) fromSnapshot(ctx context.Context, id, command string) (total, create time.Duration, err error) {
	t0 := time.Now()
	sb, err := h.c.Sandbox(ctx, id, &client.SandboxOptions{Snapshot: h.snapID})
	if err != nil {
		return 0, 0, err
	}
	create = time.Since(t0)
	if !sb.Created() {
		return 0, 0, fmt.Errorf("sandbox %s existed already", id)
	}
	if command == hlReadCmd {
		_, err = h.checkRead(ctx, sb)
	} else {
		_, err = h.run(ctx, sb, command)
	}
	return time.Since(t0), create, err
}

// checkRead runs hlReadCmd in sb and checks that the file is not empty.
func (h *headline) checkRead(ctx context.Context, sb *client.Sandbox) (int64, error) {
	out, err := h.run(ctx, sb, hlReadCmd)
	if err != nil {
		return 0, err
	}
	n, err := ints(out, 1)
	if err != nil {
		return 0, err
	}
	if n[0] < 1<<20 {
		return 0, fmt.Errorf("%s in %s: %d bytes, want a big file", hlReadCmd, sb.ID(), n[0])
	}
	return n[0], nil
}

// parallel runs fn for every id at once and returns the wall time until all ended.
func (h *headline) parallel(ctx context.Context, ids []string, fn func(context.Context, string) error) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	t0 := time.Now()
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(ctx, id)
		}()
	}
	wg.Wait()
	d := time.Since(t0)
	for _, err := range errs {
		if err != nil {
			return d, err
		}
	}
	return d, nil
}

// fromBlobStep measures a sandbox from the snapshot whose layer is not in the local cache:
// with no sandbox using the layer, hutchd is stopped, the cache entries are removed, hutchd is
// started again, and a new sandbox from the snapshot (fetching the layer from the blob store)
// runs the first command.
func (h *headline) fromBlobStep(ctx context.Context) error {
	snap, err := h.c.GetSnapshot(ctx, h.snapID)
	if err != nil {
		return err
	}
	h.d.Stop()
	for _, l := range snap.Layers {
		if err := os.RemoveAll(filepath.Join(h.d.StateDir, "data", "layers", l.Digest)); err != nil {
			return err
		}
	}
	if err := h.d.Start(ctx); err != nil {
		return err
	}
	h.c = h.d.Client()
	id := "hl-" + h.tag + "-blob"
	t0 := time.Now()
	sb, err := h.c.Sandbox(ctx, id, &client.SandboxOptions{Snapshot: h.snapID})
	if err != nil {
		return err
	}
	h.fromBlobCreate = time.Since(t0)
	if _, err := h.run(ctx, sb, hlFirstCmd); err != nil {
		return err
	}
	h.fromBlob = time.Since(t0)
	for _, l := range snap.Layers {
		if _, err := os.Stat(filepath.Join(h.d.StateDir, "data", "layers", l.Digest)); err != nil {
			return fmt.Errorf("layer %s not fetched back into the cache: %w", l.Digest, err)
		}
	}
	return h.destroy(ctx, id)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
