package main

// The code interpreter benchmark, `go run ./test/bench -code`: per language, with the
// pool warm, a new context + its first run of `1+1` (+ its delete, untimed), and runs of `1+1`
// on an existing context; the baseline is the same code through a fresh interpreter process
// (`python3 -c` / `node -e`) exec'd in the same sandbox, which is what a context saves.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hutchdev/hutch/client"
)

// The targets each figure is judged against.
const (
	goalCodeCreate = 100 * time.Millisecond
	goalCodeRun    = 5 * time.Millisecond
)

func runCode(ctx context.Context, cfg config, out io.Writer) (err error) {
	it, _, work, cleanup, err := setup(cfg, "hutch-bench-code-", "runc", "nft", "go")
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
	sb, err := c.Sandbox(ctx, "bench-code-"+randomTag(), &client.SandboxOptions{InstanceType: it.Name, KeepAlive: true})
	if err != nil {
		return err
	}
	type lang struct{ name, code, baseline string }
	langs := []lang{
		{"python", "1+1", "python3 -c 'print(1+1)'"},
		{"javascript", "1+1", "node -e 'console.log(1+1)'"},
		{"typescript", "const n: number = 1; n + 1", ""},
	}
	fmt.Fprintf(out, "Hutch code interpreter benchmark (issue 6), %s, instance type %s, -n %d create cycles, -m %d runs\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), it.Name, cfg.n, cfg.m)
	var goals []string
	for _, l := range langs {
		progress("%s: warming the pool", l.name)
		// The first context of a language starts the pool; it is not measured.
		warm, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{Language: l.name})
		if err != nil {
			return err
		}
		if err := check(sb.RunCode(ctx, l.code, &client.RunCodeOptions{Context: warm.ID})); err != nil {
			return err
		}
		create := &series{name: l.name + ": create context + first run → result"}
		runs := &series{name: l.name + ": run on an existing context → result"}
		base := &series{name: l.name + ": baseline: exec of " + l.baseline}
		for range cfg.n {
			start := time.Now()
			cc, err := sb.CreateCodeContext(ctx, client.CodeContextOptions{Language: l.name})
			if err != nil {
				return err
			}
			if err := check(sb.RunCode(ctx, l.code, &client.RunCodeOptions{Context: cc.ID})); err != nil {
				return err
			}
			create.add(time.Since(start))
			if err := sb.DeleteCodeContext(ctx, cc.ID); err != nil {
				return err
			}
			// "With the pool warm": give the pool time to start its next interpreter (IPython's
			// start takes about 1 s under a 0.5-CPU quota). Creates in a burst beyond the pool's
			// size pay that start; the table of a -warm 0 run shows it.
			time.Sleep(cfg.codeRefill)
		}
		for range cfg.m {
			start := time.Now()
			if err := check(sb.RunCode(ctx, l.code, &client.RunCodeOptions{Context: warm.ID})); err != nil {
				return err
			}
			runs.add(time.Since(start))
		}
		rows := []*series{create, runs}
		if l.baseline != "" {
			for range cfg.n {
				start := time.Now()
				r, err := sb.Exec(ctx, l.baseline, nil)
				if err != nil {
					return err
				}
				if strings.TrimSpace(string(r.Stdout)) != "2" {
					return fmt.Errorf("baseline %q printed %q", l.baseline, r.Stdout)
				}
				base.add(time.Since(start))
			}
			rows = append(rows, base)
		}
		printTable(out, l.name, rows)
		if l.baseline != "" {
			fmt.Fprintf(out, "  ratio create+first run / fresh interpreter exec: %.2f×; run / fresh interpreter exec: %.3f×\n",
				ratio(create.summarize().median, base.summarize().median), ratio(runs.summarize().median, base.summarize().median))
		}
		goals = append(goals,
			fmt.Sprintf("  %-58s %8s ms  goal ≤ %3.0f ms  %s", l.name+": create + first run (pool warm), median", ms(create.summarize().median),
				float64(goalCodeCreate)/float64(time.Millisecond), verdict(create.summarize().median <= goalCodeCreate, "over the goal")),
			fmt.Sprintf("  %-58s %8s ms  goal ≤ %3.0f ms  %s", l.name+": run on an existing context, median", ms(runs.summarize().median),
				float64(goalCodeRun)/float64(time.Millisecond), verdict(runs.summarize().median <= goalCodeRun, "over the goal")))
		if err := sb.DeleteCodeContext(ctx, warm.ID); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nGoals (issue 6)\n%s\n", strings.Join(goals, "\n"))
	return nil
}

// check turns a run that did not give the result 2 into an error.
func check(x *client.CodeExecution, err error) error {
	if err != nil {
		return err
	}
	if x.Error != nil {
		return fmt.Errorf("run failed: %s: %s", x.Error.Name, x.Error.Value)
	}
	if len(x.Results) != 1 || strings.TrimSpace(x.Results[0].Text) != "2" {
		return fmt.Errorf("run gave %+v, want the result 2", x.Results)
	}
	return nil
}
