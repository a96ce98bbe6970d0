package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/spf13/pflag"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

func (a *app) createCommand() *cobra.Command {
	var image, instanceType, snapshot, runtimeName string
	var env []string
	var sleepAfter time.Duration
	var keepAlive, snapshotOnSleep bool
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Get or create a sandbox and start it",
		Long: `Create sandbox NAME and start it, or start it if it exists. --image, --instance-type, --env,
--sleep-after, --keep-alive, --snapshot-on-sleep and --runtime apply only when the sandbox is
created ('hutch set' changes --sleep-after, --keep-alive and --snapshot-on-sleep later).`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			envVars, err := parseEnv(env)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			sb, err := c.Sandbox(cmd.Context(), args[0], &client.SandboxOptions{
				Image: image, InstanceType: instanceType, EnvVars: envVars,
				SleepAfter: sleepAfter, KeepAlive: keepAlive, Snapshot: snapshot, SnapshotOnSleep: snapshotOnSleep,
				// A given --sleep-after is sent as given: the server's validation error for
				// 0 (or anything under 1s) reaches the user instead of the default applying.
				SleepAfterSet: cmd.Flags().Changed("sleep-after"),
				Runtime:       runtimeName,
			})
			if err != nil {
				return err
			}
			if sb.Created() {
				fmt.Fprintf(a.stdout, "%s created\n", sb.ID())
			} else {
				fmt.Fprintf(a.stdout, "%s already exists (options ignored)\n", sb.ID())
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&image, "image", "", `base image (default "default")`)
	fl.StringVar(&instanceType, "instance-type", "", "lite, basic, standard-1 (default), standard-2, standard-3, standard-4")
	fl.StringArrayVarP(&env, "env", "e", nil, "environment variable K=V of the sandbox (repeatable)")
	fl.DurationVar(&sleepAfter, "sleep-after", 0, "idle time before the sandbox sleeps, at least 1s (default 10m)")
	fl.BoolVar(&keepAlive, "keep-alive", false, "never sleep when idle")
	fl.BoolVar(&snapshotOnSleep, "snapshot-on-sleep", false, "snapshot the sandbox every time it sleeps ('hutch status' shows the last one)")
	fl.StringVar(&snapshot, "snapshot", "", "create from this snapshot (sha256-…, from 'hutch snapshot'): its disk, image and settings")
	fl.StringVar(&runtimeName, "runtime", "", `isolation runtime: "runc" or "gvisor" (default: hutchd's --runtime)`)
	return cmd
}

func (a *app) listCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List sandboxes",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListSandboxes(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.stdout, list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tIMAGE\tINSTANCE TYPE\tSLEEP AFTER\tCREATED")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Status, s.Image, s.InstanceType, sleepSetting(s), fmtTime(s.CreatedAt))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) statusCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show one sandbox (without starting it)",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			info, err := c.GetSandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.stdout, info)
			}
			return printSandbox(a.stdout, info)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// startCommand is `hutch start NAME` (start a stopped sandbox) and, with `-- CMD`, the issue's
// `hutch start NAME -- CMD…` (start a background process: the same as `hutch spawn`).
func (a *app) startCommand() *cobra.Command {
	lifecycle := a.lifecycleCommand("start", "", (*client.Sandbox).Start)
	cmd := a.spawnCommand()
	spawnArgs, spawnRun := cmd.Args, cmd.RunE
	cmd.Use = "start NAME [flags] [-- CMD [ARG...]]"
	cmd.Short = "Start a stopped sandbox; with -- CMD, start a background process in it"
	cmd.Long = "Without CMD: start sandbox NAME if it is stopped and print its status.\n\n" +
		"With -- CMD: the same as 'hutch spawn': " + cmd.Long
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 1 && c.ArgsLenAtDash() < 0 {
			changed := false // --id, --wait-log… mean a process, which needs -- CMD
			c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) { changed = changed || f.Changed })
			if changed {
				return &usageError{errors.New("start: process flags need a command: hutch start NAME [flags] -- CMD [ARG...]")}
			}
			return nil
		}
		return spawnArgs(c, args)
	}
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 1 {
			return lifecycle.RunE(c, args)
		}
		return spawnRun(c, args)
	}
	return cmd
}

func (a *app) stopCommand() *cobra.Command {
	return a.lifecycleCommand("stop", "Stop a sandbox, keeping its disk", (*client.Sandbox).Stop)
}

func (a *app) lifecycleCommand(verb, short string, op func(*client.Sandbox, context.Context) (*client.SandboxInfo, error)) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			info, err := op(c.SandboxHandle(args[0]), cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s %s\n", info.ID, info.Status)
			return nil
		},
	}
}

func (a *app) destroyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "destroy NAME",
		Short: "Destroy a sandbox and everything in it",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.SandboxHandle(args[0]).Destroy(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s destroyed\n", args[0])
			return nil
		},
	}
}

func printSandbox(w io.Writer, s *client.SandboxInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ID:\t%s\n", s.ID)
	fmt.Fprintf(tw, "Status:\t%s\n", s.Status)
	fmt.Fprintf(tw, "Image:\t%s\n", s.Image)
	fmt.Fprintf(tw, "Instance type:\t%s\n", s.InstanceType)
	if s.Runtime != "" {
		fmt.Fprintf(tw, "Runtime:\t%s\n", s.Runtime)
	}
	fmt.Fprintf(tw, "Created:\t%s\n", fmtTime(s.CreatedAt))
	fmt.Fprintf(tw, "Started:\t%s\n", fmtTime(s.StartedAt))
	fmt.Fprintf(tw, "Sleep after:\t%s\n", sleepSetting(*s))
	if s.SleepMode != "" {
		fmt.Fprintf(tw, "Sleep mode:\t%s\n", s.SleepMode)
	}
	if s.SleepNote != "" {
		fmt.Fprintf(tw, "Sleep note:\t%s\n", Printable(s.SleepNote))
	}
	if !s.LastActivityAt.IsZero() {
		fmt.Fprintf(tw, "Last activity:\t%s\n", fmtTime(s.LastActivityAt))
	}
	if s.LastError != "" {
		fmt.Fprintf(tw, "Last error:\t%s\n", Printable(s.LastError))
	}
	if s.SnapshotOnSleep {
		fmt.Fprintf(tw, "Snapshot on sleep:\t%t\n", s.SnapshotOnSleep)
	}
	if s.LastSnapshot != "" {
		fmt.Fprintf(tw, "Last snapshot:\t%s\n", s.LastSnapshot)
	}
	if s.LastSnapshotError != "" {
		fmt.Fprintf(tw, "Last snapshot error:\t%s\n", Printable(s.LastSnapshotError))
	}
	if s.Address != "" {
		fmt.Fprintf(tw, "Address:\t%s\n", s.Address)
	}
	for _, k := range slices.Sorted(maps.Keys(s.EnvVars)) {
		fmt.Fprintf(tw, "Env:\t%s=%s\n", k, Printable(s.EnvVars[k]))
	}
	return tw.Flush()
}

// sleepSetting is "10m", or "never (keep-alive)".
func sleepSetting(s client.SandboxInfo) string {
	if s.KeepAlive {
		return "never (keep-alive)"
	}
	if s.SleepAfter == "" {
		return "-"
	}
	return s.SleepAfter
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
