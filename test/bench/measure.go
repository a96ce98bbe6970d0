package main

import (
	"context"
	"fmt"
	"github.com/hutchdev/hutch/internal/daemontest"
	"io"
	"strings"
	"time"

	"github.com/hutchdev/hutch/client"
)

// bench holds one run's clients and results.
type bench struct {
	cfg  config
	c    *client.Client
	raw  *rawRunc
	d    *daemontest.Daemon
	tag  string // random, in every ID of this run
	opts *client.SandboxOptions

	// Cold create.
	rawRun, rawTotal           series
	hCreate, hFirstExec, hCold series
	coldIDs                    []string // sandbox IDs of the timed iterations

	// Exec round trip.
	runcExec, apiExec, agentExec, agentPing, bashSpawn, runcState series
	sandboxBash                                                   series

	preview previewResults
}

// coldCreate alternates raw `runc run` iterations and hutch create → first exec iterations,
// after one untimed warm-up of each.
func (b *bench) coldCreate(ctx context.Context) error {
	b.rawRun.name = "raw: runc run /bin/true"
	b.rawTotal.name = "raw: mount + runc run + unmount"
	b.hCreate.name = "hutch: create (Sandbox)"
	b.hFirstExec.name = "hutch: first Exec(true)"
	b.hCold.name = "hutch: create → first exec"
	progress("cold create: 1 warm-up + %d iterations of each", b.cfg.n)
	for i := 0; i <= b.cfg.n; i++ {
		timed := i > 0
		rawOne := func() error {
			run, total, err := b.raw.runTrue(ctx, fmt.Sprintf("hbench-%s-run-%d", b.tag, i))
			if err != nil {
				return err
			}
			if timed {
				b.rawRun.add(run)
				b.rawTotal.add(total)
			}
			return nil
		}
		hutchOne := func() error {
			id := fmt.Sprintf("bench-%s-cold-%d", b.tag, i)
			t0 := time.Now()
			sb, err := b.c.Sandbox(ctx, id, b.opts)
			if err != nil {
				return err
			}
			t1 := time.Now()
			res, err := sb.Exec(ctx, "true", nil)
			t2 := time.Now()
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return fmt.Errorf("exec true in %s: exit code %d", id, res.ExitCode)
			}
			if timed {
				b.hCreate.add(t1.Sub(t0))
				b.hFirstExec.add(t2.Sub(t1))
				b.hCold.add(t2.Sub(t0))
				b.coldIDs = append(b.coldIDs, id)
			}
			// Not timed.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			return sb.Destroy(dctx)
		}
		steps := []func() error{rawOne, hutchOne}
		if i%2 == 1 {
			steps[0], steps[1] = steps[1], steps[0]
		}
		for _, step := range steps {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := step(); err != nil {
				return err
			}
		}
	}
	return nil
}

// execRoundTrip times `true` in one running sandbox and one running raw container, rotating
// the order of the measurements every iteration, after a few untimed warm-ups.
func (b *bench) execRoundTrip(ctx context.Context) error {
	b.runcExec.name = "raw: runc exec <id> true"
	b.apiExec.name = "hutch: Exec(true) via API"
	b.agentExec.name = "  agent direct: POST /api/execute"
	b.agentPing.name = "  agent direct: GET /api/ping"
	b.bashSpawn.name = "  host: bash --norc --noprofile -c true"
	b.runcState.name = "raw: runc state <id>"
	b.sandboxBash.name = "  in sandbox: bash --norc --noprofile -c true"

	longID := fmt.Sprintf("hbench-%s-long", b.tag)
	if err := b.raw.startLong(ctx, longID); err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = b.raw.cleanup(cctx, longID)
	}()
	sb, err := b.c.Sandbox(ctx, fmt.Sprintf("bench-%s-exec", b.tag), b.opts)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = sb.Destroy(cctx)
	}()
	agent, err := newAgentDirect(ctx, b.d.StateDir, sb.ID())
	if err != nil {
		return err
	}
	defer agent.close()

	timeIt := func(s *series, timed bool, f func() error) error {
		t0 := time.Now()
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if timed {
			s.add(time.Since(t0))
		}
		return nil
	}
	steps := []struct {
		s *series
		f func() error
	}{
		{&b.runcExec, func() error { return b.raw.execTrue(ctx, longID) }},
		{&b.apiExec, func() error {
			res, err := sb.Exec(ctx, "true", nil)
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit code %d", res.ExitCode)
			}
			return err
		}},
		{&b.agentExec, func() error { return agent.execTrue(ctx) }},
		{&b.agentPing, func() error { return agent.ping(ctx) }},
		{&b.bashSpawn, func() error { return hostBash(ctx) }},
		{&b.runcState, func() error { _, err := b.raw.rt.State(ctx, longID); return err }},
	}
	const warmup = 5
	progress("exec: %d warm-ups + %d iterations of each", warmup, b.cfg.m)
	for i := 0; i < warmup+b.cfg.m; i++ {
		for k := range steps {
			if err := ctx.Err(); err != nil {
				return err
			}
			st := steps[(i+k)%len(steps)]
			if err := timeIt(st.s, i >= warmup, st.f); err != nil {
				return err
			}
		}
	}
	return sandboxBashSpawn(ctx, sb, &b.sandboxBash)
}

// sandboxBashSpawn times n single `bash --norc --noprofile -c true` inside the sandbox (under
// its cgroup and seccomp profile) with bash's own clock. A pause after each keeps the loop
// under the instance type's CPU quota, which a tight loop would exhaust and get throttled by.
func sandboxBashSpawn(ctx context.Context, sb *client.Sandbox, s *series) error {
	const n = 30
	res, err := sb.Exec(ctx, fmt.Sprintf(`for ((i=0;i<%d;i++)); do s=$EPOCHREALTIME; bash --norc --noprofile -c true; echo "$s $EPOCHREALTIME"; sleep 0.02; done`, n), nil)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		var start, end float64
		if _, err := fmt.Sscan(line, &start, &end); err != nil || end < start {
			return fmt.Errorf("in-sandbox bash timing: unexpected output %q", line)
		}
		s.add(time.Duration((end - start) * float64(time.Second)))
	}
	if len(s.samples) != n {
		return fmt.Errorf("in-sandbox bash timing: %d samples, want %d", len(s.samples), n)
	}
	return nil
}

// report prints the tables, ratios, goals and the create-path breakdown.
func (b *bench) report(out io.Writer) {
	printTable(out, "Cold create → first exec (ms)", []*series{&b.rawRun, &b.rawTotal, &b.hCreate, &b.hFirstExec, &b.hCold})
	printTable(out, "Exec of `true` in a running container (ms)", []*series{&b.runcExec, &b.apiExec, &b.agentExec, &b.agentPing, &b.bashSpawn, &b.sandboxBash, &b.runcState})

	cold, run, total := b.hCold.summarize(), b.rawRun.summarize(), b.rawTotal.summarize()
	api, rexec := b.apiExec.summarize(), b.runcExec.summarize()
	fmt.Fprintf(out, "\nRatios (medians)\n")
	fmt.Fprintf(out, "  create → first exec / raw runc run            %6.2f×  (p90 %.2f×, min %.2f×)\n",
		ratio(cold.median, run.median), ratio(cold.p90, run.p90), ratio(cold.min, run.min))
	fmt.Fprintf(out, "  create → first exec / raw mount+run+unmount   %6.2f×\n", ratio(cold.median, total.median))
	fmt.Fprintf(out, "  API exec / runc exec                          %6.2f×  (p90 %.2f×, min %.2f×)\n",
		ratio(api.median, rexec.median), ratio(api.p90, rexec.p90), ratio(api.min, rexec.min))

	fmt.Fprintf(out, "\nGoals\n")
	r := ratio(cold.median, run.median)
	fmt.Fprintf(out, "  create → first exec ≤ %.0f× raw runc run:  %.2f× (%s vs %s ms)  %s\n",
		goalCreateRatio, r, ms(cold.median), ms(run.median), verdict(r <= goalCreateRatio,
			fmt.Sprintf("missed by %s ms (%.0f%% over the %s ms target)", ms(cold.median-time.Duration(goalCreateRatio*float64(run.median))),
				100*(r/goalCreateRatio-1), ms(time.Duration(goalCreateRatio*float64(run.median))))))
	fmt.Fprintf(out, "  exec round trip median ≤ %s ms:           %s ms  %s\n",
		ms(goalExecMedian), ms(api.median), verdict(api.median <= goalExecMedian,
			fmt.Sprintf("missed by %s ms (%.2f× the target)", ms(api.median-goalExecMedian), ratio(api.median, goalExecMedian))))

	b.printCreateBreakdown(out)
	b.reportPreview(out)
}

func verdict(ok bool, miss string) string {
	if ok {
		return "MET"
	}
	return "MISSED: " + miss
}
