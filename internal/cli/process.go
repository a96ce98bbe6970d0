package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

type spawnFlags struct {
	id          string
	session     string
	cwd         string
	env         []string
	logBuffer   int
	waitLog     string
	waitPort    int
	waitPath    string
	waitTCP     bool
	waitTimeout time.Duration
	asJSON      bool
}

func (a *app) spawnCommand() *cobra.Command {
	var f spawnFlags
	cmd := &cobra.Command{
		Use:   "spawn NAME [flags] -- CMD [ARG...]",
		Short: "Start a background process in a sandbox (created if needed) and print its ID",
		Long: `Start CMD as a background process in sandbox NAME, creating and starting the sandbox if
needed, and print the process ID on stdout. The process runs on after hutch exits; its output is
kept by the sandbox: read it with 'hutch logs', stop it with 'hutch kill'. CMD is passed as by
'hutch exec' (one argument verbatim to bash, several quoted one by one).

Readiness: --wait-log REGEX waits for an output line matching REGEX (RE2 syntax; lines already
printed count), --wait-port PORT waits until PORT answers inside the sandbox (HTTP GET of
--wait-path with a 2xx/3xx status, or a TCP connection with --wait-tcp). With both, the log is
awaited first. The ID is printed before waiting; a failed wait (the process exited first,
--wait-timeout expired) exits 1 and leaves the process as it is.

  ID=$(hutch spawn box --wait-port 3000 -- npm run dev)`,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if len(args) < 2 || (dash >= 0 && dash != 1) {
				return &usageError{errors.New("spawn: want NAME -- CMD [ARG...]")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runSpawn(cmd.Context(), args[0], args[1:], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.id, "id", "", "process ID (1-128 of [A-Za-z0-9_.-], starting with a letter, digit or _, not kill-all or list; default: proc_<ms>_<random>)")
	fl.StringVarP(&f.session, "session", "s", "", "session whose cwd and environment the process starts with (default: the default session)")
	fl.StringVarP(&f.cwd, "cwd", "w", "", "working directory of the process (default: the session's)")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "environment variable K=V of the process (repeatable)")
	fl.IntVar(&f.logBuffer, "log-buffer", 0, "bytes of each output stream kept by the sandbox, 65536-268435456 (default: the sandbox's, 4 MiB)")
	fl.StringVar(&f.waitLog, "wait-log", "", "after starting, wait for an output line matching this regular expression")
	fl.IntVar(&f.waitPort, "wait-port", 0, "after starting, wait until this port answers inside the sandbox")
	fl.StringVar(&f.waitPath, "wait-path", "", `HTTP path checked by --wait-port (default "/")`)
	fl.BoolVar(&f.waitTCP, "wait-tcp", false, "--wait-port checks a TCP connection instead of an HTTP GET")
	fl.DurationVar(&f.waitTimeout, "wait-timeout", 0, "bound on each wait (e.g. 60s; 0 = no limit)")
	fl.BoolVar(&f.asJSON, "json", false, "print the process record as JSON instead of its ID")
	return cmd
}

func (a *app) runSpawn(ctx context.Context, name string, argv []string, f spawnFlags) error {
	env, err := parseEnv(f.env)
	if err != nil {
		return err
	}
	if f.waitTimeout < 0 {
		return &usageError{fmt.Errorf("--wait-timeout %s: must not be negative", f.waitTimeout)}
	}
	if f.waitPort < 0 || f.waitPort > 65535 {
		return &usageError{fmt.Errorf("--wait-port %d: want 1-65535", f.waitPort)}
	}
	if f.waitPort == 0 && (f.waitPath != "" || f.waitTCP) {
		return &usageError{errors.New("--wait-path and --wait-tcp need --wait-port")}
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	sb, err := c.Sandbox(ctx, name, nil)
	if err != nil {
		return err
	}
	a.noteCreated(sb, name)
	p, err := sb.StartProcess(ctx, JoinCommand(argv), client.ProcessOptions{
		ID: f.id, SessionID: f.session, Env: env, Cwd: f.cwd, LogBufferBytes: f.logBuffer,
	})
	if err != nil {
		return err
	}
	if f.asJSON {
		if err := writeJSON(a.stdout, p.Info()); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(a.stdout, Printable(p.ID()))
	}
	if f.waitLog != "" {
		m, err := p.WaitForLog(ctx, f.waitLog, f.waitTimeout)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stderr, "%s ready: %s: %s\n", Printable(p.ID()), Printable(m.Stream), Printable(m.Line))
	}
	if f.waitPort != 0 {
		opts := client.PortWaitOptions{Path: f.waitPath, Timeout: f.waitTimeout}
		if f.waitTCP {
			opts.Mode = client.PortModeTCP
		}
		r, err := p.WaitForPort(ctx, f.waitPort, opts)
		if err != nil {
			return err
		}
		if r.StatusCode != 0 {
			fmt.Fprintf(a.stderr, "%s ready: port %d answered HTTP %d\n", Printable(p.ID()), r.Port, r.StatusCode)
		} else {
			fmt.Fprintf(a.stderr, "%s ready: port %d accepts connections\n", Printable(p.ID()), r.Port)
		}
	}
	return nil
}

func (a *app) psCommand() *cobra.Command {
	var running, asJSON bool
	cmd := &cobra.Command{
		Use:   "ps NAME",
		Short: "List the background processes of a sandbox",
		Long: `List the background processes of sandbox NAME in start order: running ones and finished
ones still retained (for an hour by default). EXIT is "-" while a process runs.`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			status := ""
			if running {
				status = string(client.ProcessRunning)
			}
			list, err := c.SandboxHandle(args[0]).ListProcesses(cmd.Context(), status)
			if err != nil {
				return err
			}
			if asJSON {
				if list == nil {
					list = []client.ProcessInfo{}
				}
				return writeJSON(a.stdout, list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tPID\tSTATUS\tEXIT\tSTARTED\tCOMMAND")
			for _, p := range list {
				exit := "-"
				if p.ExitCode != nil {
					exit = fmt.Sprint(*p.ExitCode)
				}
				command := strings.Join(strings.Fields(p.Command), " ")
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", Printable(p.ID), p.PID, Printable(string(p.Status)), exit, fmtTime(p.StartTime), Printable(command))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&running, "running", false, "only running processes")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) logsCommand() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs [-f] NAME ID",
		Short: "Print the output of a background process",
		Long: `Print the output that sandbox NAME holds for process ID: its stdout to hutch's stdout and its
stderr to hutch's stderr, byte for byte. Output older than the process's log buffer was dropped;
it is replaced by a "[hutch: N earlier bytes … were dropped …]" line.

With -f, print the held output and then the live output until the process exits (reconnecting by
itself if the connection is cut, without losing or repeating output), and exit with the process's
exit code; 125 when hutch failed (hutchd unreachable, the stream could not be resumed), 130 when
interrupted (the process keeps running). Without -f, hutch logs exits 0.`,
		Args: exactArgs("NAME", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			p := c.SandboxHandle(args[0]).Process(args[1])
			if follow {
				return a.followLogs(cmd.Context(), p)
			}
			logs, err := p.Logs(cmd.Context())
			if err != nil {
				return err
			}
			if _, err := a.stdout.Write(logs.Stdout); err != nil {
				return fmt.Errorf("write stdout: %w", err)
			}
			if _, err := a.stderr.Write(logs.Stderr); err != nil {
				return fmt.Errorf("write stderr: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the output until the process exits, then exit with its exit code")
	return cmd
}

func (a *app) followLogs(ctx context.Context, p *client.Process) error {
	onDropped := func(ev client.LogEvent) {
		fmt.Fprintf(a.stderr, "[hutch: %d earlier bytes of %s were dropped]\n", ev.To-ev.From, ev.Stream)
	}
	ex, err := p.StreamLogsTo(ctx, client.LogOffsets{}, a.stdout, a.stderr, onDropped)
	if err != nil {
		return execFailure(ctx, err)
	}
	return &exitError{code: ex.ExitCode}
}

func (a *app) killCommand() *cobra.Command {
	var all bool
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "kill NAME (ID | --all)",
		Short: "Kill a background process (or all of them) with its whole process tree",
		Long: `Kill process ID of sandbox NAME and every process it started: SIGTERM, then SIGKILL to
whatever is left after --grace (default: the sandbox's, 5s; 0 = SIGKILL at once). hutch waits
until the process has exited and prints its final state. A process that had already ended is
not an error. With --all, kill every running process of the sandbox and print how many.`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case all && len(args) != 1:
				return &usageError{errors.New("kill --all: want NAME only")}
			case !all && len(args) != 2:
				return &usageError{errors.New("kill: want NAME ID, or NAME --all")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if grace < 0 {
				return &usageError{fmt.Errorf("--grace %s: must not be negative", grace)}
			}
			if all && cmd.Flags().Changed("grace") {
				return &usageError{errors.New("--grace does not apply to --all")}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			sb := c.SandboxHandle(args[0])
			if all {
				n, err := sb.KillAllProcesses(cmd.Context())
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "killed %d process(es)\n", n)
				return nil
			}
			if !cmd.Flags().Changed("grace") {
				grace = -1
			}
			info, err := sb.Process(args[1]).Kill(cmd.Context(), grace)
			if err != nil {
				return err
			}
			exit := ""
			if info.ExitCode != nil {
				exit = fmt.Sprintf(" (exit %d)", *info.ExitCode)
			}
			fmt.Fprintf(a.stdout, "%s %s%s\n", Printable(info.ID), Printable(string(info.Status)), exit)
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "kill every running process of the sandbox")
	cmd.Flags().DurationVar(&grace, "grace", 0, "time between SIGTERM and SIGKILL (e.g. 2s; default: the sandbox's, 5s)")
	return cmd
}
