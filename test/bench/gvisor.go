package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hutchdev/hutch/client"
)

// runGVisor is the -gvisor mode: create → first exec and the exec round trip through
// the API, for sandboxes of the runc and of the gvisor runtime of one hutchd, in the same run.
// Iterations alternate between the runtimes (the order flips every iteration) so machine noise
// hits both alike; one untimed warm-up of each comes first.
func runGVisor(ctx context.Context, cfg config, out io.Writer) (err error) {
	it, _, work, cleanup, err := setup(cfg, "hutch-bench-gvisor-", "runc", "runsc", "nft", "go")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup()) }()
	bins := work + "/bin" // built by setup
	progress("starting hutchd")
	d, err := startDaemon(ctx, bins, work, cfg.imagesDir)
	if err != nil {
		return err
	}
	defer func() { err = stopDaemon(ctx, cfg, d, 2*time.Minute, err) }()
	c := d.Client()
	img, err := ensureImage(ctx, c, cfg.imagesDir)
	if err != nil {
		return err
	}
	printEnv(out, cfg, it, img)
	tag := randomTag()
	runtimes := []string{"runc", "gvisor"}
	cold := map[string]*series{}
	exec := map[string]*series{}
	for _, rt := range runtimes {
		cold[rt] = &series{name: rt + ": create → first Exec(true)"}
		exec[rt] = &series{name: rt + ": Exec(true) via API"}
	}

	progress("cold create: 1 warm-up + %d iterations per runtime", cfg.n)
	for i := 0; i <= cfg.n; i++ {
		for k := range runtimes {
			rt := runtimes[(i+k)%len(runtimes)]
			if err := ctx.Err(); err != nil {
				return errors.New("interrupted")
			}
			id := fmt.Sprintf("bench-%s-%s-%d", tag, rt, i)
			t0 := time.Now()
			sb, err := c.Sandbox(ctx, id, &client.SandboxOptions{InstanceType: it.Name, Runtime: rt})
			if err != nil {
				return fmt.Errorf("create %s: %w", rt, err)
			}
			res, err := sb.Exec(ctx, "true", nil)
			if err != nil || res.ExitCode != 0 {
				return fmt.Errorf("first exec in %s: %v %v", id, res, err)
			}
			if i > 0 {
				cold[rt].add(time.Since(t0))
			}
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			err = sb.Destroy(dctx)
			cancel()
			if err != nil {
				return err
			}
		}
	}

	sbs := map[string]*client.Sandbox{}
	for _, rt := range runtimes {
		sb, err := c.Sandbox(ctx, fmt.Sprintf("bench-%s-%s-exec", tag, rt), &client.SandboxOptions{InstanceType: it.Name, Runtime: rt})
		if err != nil {
			return fmt.Errorf("create %s: %w", rt, err)
		}
		sbs[rt] = sb
	}
	const warmup = 5
	progress("exec: %d warm-ups + %d iterations per runtime", warmup, cfg.m)
	for i := 0; i < warmup+cfg.m; i++ {
		for k := range runtimes {
			rt := runtimes[(i+k)%len(runtimes)]
			if err := ctx.Err(); err != nil {
				return errors.New("interrupted")
			}
			t0 := time.Now()
			res, err := sbs[rt].Exec(ctx, "true", nil)
			if err != nil || res.ExitCode != 0 {
				return fmt.Errorf("exec in %s: %v %v", rt, res, err)
			}
			if i >= warmup {
				exec[rt].add(time.Since(t0))
			}
		}
	}

	printTable(out, "gVisor against runc, through hutchd's API", []*series{cold["runc"], cold["gvisor"], exec["runc"], exec["gvisor"]})
	fmt.Fprintf(out, "\n  create → first exec: gvisor/runc = %.2f× (medians)\n", ratio(cold["gvisor"].summarize().median, cold["runc"].summarize().median))
	fmt.Fprintf(out, "  exec round trip:     gvisor/runc = %.2f× (medians)\n", ratio(exec["gvisor"].summarize().median, exec["runc"].summarize().median))
	return nil
}
