package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/sandbox"
)

// runMemory is the -memory mode: sleep and wake of a gVisor sandbox that holds a
// Python code context and a background process, with memory sleeps (hutchd --sleep-memory on:
// runsc checkpoint and restore) against disk-only sleeps (--sleep-memory off: processes stop,
// the wake starts the sandbox afresh) of the same sandbox, each on a hutchd of its own in turn,
// in the same run. Timed: Sleep (the API call, until the sandbox is asleep) and the wake (the
// first Exec(true) after it). After every wake the mode is checked: a memory sleep keeps the
// context's variable, a disk sleep loses the context (it is created again, untimed). The size
// of each memory image is read while the sandbox sleeps.
func runMemory(ctx context.Context, cfg config, out io.Writer) (err error) {
	it, _, work, cleanup, err := setup(cfg, "hutch-bench-memory-", "runc", "runsc", "nft", "go")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup()) }()
	bins := work + "/bin" // built by setup
	rows := map[string]*memoryRows{}
	for _, mode := range []string{"memory", "disk"} {
		r := &memoryRows{
			sleep: &series{name: "gvisor, " + mode + " sleep: Sleep()"},
			wake:  &series{name: "gvisor, " + mode + " sleep: wake → first Exec(true)"},
		}
		rows[mode] = r
		if err := memoryRound(ctx, cfg, it, bins, filepath.Join(work, mode), mode, r, out); err != nil {
			return fmt.Errorf("%s sleeps: %w", mode, err)
		}
	}
	printTable(out, "gVisor sleep and wake: memory (checkpoint/restore) against disk only", []*series{rows["memory"].sleep, rows["disk"].sleep, rows["memory"].wake, rows["disk"].wake})
	fmt.Fprintf(out, "\n  sleep: memory/disk = %.2f× (medians)\n", ratio(rows["memory"].sleep.summarize().median, rows["disk"].sleep.summarize().median))
	fmt.Fprintf(out, "  wake:  memory/disk = %.2f× (medians; a disk wake starts the processes again, a memory wake has them)\n", ratio(rows["memory"].wake.summarize().median, rows["disk"].wake.summarize().median))
	if n := len(rows["memory"].images); n > 0 {
		var sum int64
		for _, b := range rows["memory"].images {
			sum += b
		}
		fmt.Fprintf(out, "  memory image: %.1f MiB on average over %d sleeps\n", float64(sum)/float64(n)/(1<<20), n)
	}
	return nil
}

type memoryRows struct {
	sleep, wake *series
	images      []int64
}

// memoryRound runs one mode's iterations ("memory" or "disk") on a hutchd of its own under dir.
func memoryRound(ctx context.Context, cfg config, it sandbox.InstanceType, bins, dir, mode string, r *memoryRows, out io.Writer) (err error) {
	flag := map[string]string{"memory": "on", "disk": "off"}[mode]
	progress("starting hutchd with --sleep-memory %s", flag)
	d, err := startDaemon(ctx, bins, dir, cfg.imagesDir, "--sleep-memory", flag)
	if err != nil {
		return err
	}
	defer func() { err = stopDaemon(ctx, cfg, d, 2*time.Minute, err) }()
	c := d.Client()
	img, err := ensureImage(ctx, c, cfg.imagesDir)
	if err != nil {
		return err
	}
	if mode == "memory" {
		printEnv(out, cfg, it, img)
	}
	id := "bench-mem-" + randomTag()
	sb, err := c.Sandbox(ctx, id, &client.SandboxOptions{InstanceType: cfg.instanceType, Runtime: "gvisor"})
	if err != nil {
		return err
	}
	if _, err := sb.StartProcess(ctx, "sleep infinity", client.ProcessOptions{ID: "bg"}); err != nil {
		return err
	}
	newContext := func() (string, error) {
		cc, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{Language: client.LanguagePython})
		if err != nil {
			return "", err
		}
		ex, err := sb.RunCode(ctx, "x = 6 * 7", &client.RunCodeOptions{Context: cc.ID})
		if err != nil || ex.Error != nil {
			return "", fmt.Errorf("run in a new context: %v %+v", err, ex)
		}
		return cc.ID, nil
	}
	cid, err := newContext()
	if err != nil {
		return err
	}
	progress("%s sleeps: 1 warm-up + %d iterations", mode, cfg.n)
	for i := 0; i <= cfg.n; i++ {
		if err := ctx.Err(); err != nil {
			return errors.New("interrupted")
		}
		t0 := time.Now()
		info, err := sb.Sleep(ctx)
		if err != nil {
			return err
		}
		slept := time.Since(t0)
		if info.SleepMode != mode {
			return fmt.Errorf("sleep %d: sleepMode %q (%s), want %s", i, info.SleepMode, info.SleepNote, mode)
		}
		if mode == "memory" {
			r.images = append(r.images, dirSize(filepath.Join(dir, "state", "data", "sandboxes", id, "memory")))
		}
		t0 = time.Now()
		res, err := sb.Exec(ctx, "true", nil)
		if err != nil || res.ExitCode != 0 {
			return fmt.Errorf("first exec after wake: %v %v", res, err)
		}
		woke := time.Since(t0)
		if i > 0 {
			r.sleep.add(slept)
			r.wake.add(woke)
		}
		ex, err := sb.RunCode(ctx, "x", &client.RunCodeOptions{Context: cid})
		kept := err == nil && ex.Error == nil && len(ex.Results) > 0 && ex.Results[0].Text == "42"
		if kept != (mode == "memory") {
			return fmt.Errorf("after wake %d: context kept = %v (%v %+v); want %v", i, kept, err, ex, mode == "memory")
		}
		if !kept {
			if cid, err = newContext(); err != nil {
				return err
			}
		}
	}
	return nil
}

// dirSize is the total size of the regular files below dir (0 when it cannot be read).
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
