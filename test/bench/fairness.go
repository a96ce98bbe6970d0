package main

// The CPU fairness benchmark, `go run ./test/bench -fairness`: the exec round trip
// (Exec("true") through the API) of an idle sandbox of -type, measured while a second sandbox
// is quiet and while it spins 4 busy loops per host CPU. The busy sandbox is a standard-4, whose
// CPU quota (4 CPUs) does not stop it on a host of fewer CPUs: only the cgroup CPU weights
// (cpu.shares, 1024 per CPU of the instance type) stand between it and the idle sandbox. The
// figure is the ratio of the loaded to the quiet median (and p90). Quiet and loaded rounds
// alternate so that machine noise hits both alike.

import (
	"context"
	"errors"
	"fmt"
	"io"
	goruntime "runtime"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// busyInstanceType is the size of the sandbox that spins.
const busyInstanceType = "standard-4"

func runFairness(ctx context.Context, cfg config, out io.Writer) (err error) {
	it, _, work, cleanup, err := setup(cfg, "hutch-bench-fair-", "runc", "nft", "go")
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
	idle, err := c.Sandbox(ctx, "bench-idle-"+randomTag(), &client.SandboxOptions{InstanceType: it.Name, KeepAlive: true})
	if err != nil {
		return err
	}
	busy, err := c.Sandbox(ctx, "bench-busy-"+randomTag(), &client.SandboxOptions{InstanceType: busyInstanceType, KeepAlive: true})
	if err != nil {
		return err
	}
	loops := 4 * goruntime.NumCPU()
	spin := fmt.Sprintf("for i in $(seq %d); do nohup sh -c 'while :; do :; done' >/dev/null 2>&1 & done", loops)
	stop := "pkill -9 -f 'while :; do :; done'; true"
	quiet := &series{name: "idle sandbox: exec round trip, neighbour quiet"}
	loaded := &series{name: fmt.Sprintf("idle sandbox: exec round trip, neighbour spinning %d loops", loops)}
	rounds := 5
	per := max(cfg.m/rounds, 1)
	measure := func(s *series) error {
		for range per {
			start := time.Now()
			res, err := idle.Exec(ctx, "true", nil)
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return fmt.Errorf("exec true: exit %d", res.ExitCode)
			}
			s.add(time.Since(start))
		}
		return nil
	}
	for i := range rounds {
		progress("round %d of %d", i+1, rounds)
		if err := measure(quiet); err != nil {
			return err
		}
		if _, err := busy.Exec(ctx, spin, nil); err != nil {
			return err
		}
		time.Sleep(2 * time.Second) // let the loops take the CPUs
		err := measure(loaded)
		if _, serr := busy.Exec(ctx, stop, nil); serr != nil {
			err = errors.Join(err, serr)
		}
		if err != nil {
			return err
		}
		time.Sleep(time.Second)
	}
	fmt.Fprintf(out, "Hutch CPU fairness benchmark (issue 8), %s, %d CPUs, idle sandbox %s (cpu.shares %d), busy sandbox %s (cpu.shares %d), %d execs per series\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), goruntime.NumCPU(), it.Name, ocispec.CPUShares(it.MilliCPU), busyInstanceType, ocispec.CPUShares(4000), len(quiet.samples))
	printTable(out, "Exec round trip of the idle sandbox", []*series{quiet, loaded})
	q, l := quiet.summarize(), loaded.summarize()
	fmt.Fprintf(out, "\nloaded/quiet: median %.2f×, p90 %.2f×\n", ratio(l.median, q.median), ratio(l.p90, q.p90))
	return nil
}
