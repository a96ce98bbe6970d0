package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

// sleepCommand is `hutch sleep NAME`.
func (a *app) sleepCommand() *cobra.Command {
	cmd := a.lifecycleCommand("sleep", "Put a sandbox to sleep now (its disk, sessions and ports remain)", (*client.Sandbox).Sleep)
	cmd.Long = `Put sandbox NAME to sleep now: its processes are stopped, its file data flushed, its
container and network torn down; its disk, sessions (cwd and exported variables) and exposed
ports remain. Any later operation on it, or 'hutch wake', wakes it. A sandbox also sleeps by
itself after --sleep-after of idleness unless --keep-alive is set (see 'hutch set').`
	return cmd
}

// wakeCommand is `hutch wake NAME`.
func (a *app) wakeCommand() *cobra.Command {
	return a.lifecycleCommand("wake", "Wake a sleeping sandbox (any operation on it does too)", (*client.Sandbox).Wake)
}

// setCommand is `hutch set NAME [--sleep-after D] [--keep-alive[=false]] [--snapshot-on-sleep[=false]]`.
func (a *app) setCommand() *cobra.Command {
	var sleepAfter time.Duration
	var keepAlive, snapshotOnSleep bool
	cmd := &cobra.Command{
		Use:   "set NAME [--sleep-after D] [--keep-alive[=true|false]] [--snapshot-on-sleep[=true|false]]",
		Short: "Change a sandbox's sleep settings",
		Long: `Change the settings of sandbox NAME without waking it. --sleep-after is how long it may be
idle before it sleeps (a duration such as 30s, 10m or 1h; at least 1s); --keep-alive keeps it
from ever sleeping when idle, --keep-alive=false lets it sleep again. --snapshot-on-sleep makes
every sleep snapshot the sandbox (its ID shows in 'hutch status' as lastSnapshot). On a running
sandbox the idle timer starts again from now.`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var u client.SandboxUpdate
			if cmd.Flags().Changed("sleep-after") {
				u.SleepAfter = &sleepAfter
			}
			if cmd.Flags().Changed("keep-alive") {
				u.KeepAlive = &keepAlive
			}
			if cmd.Flags().Changed("snapshot-on-sleep") {
				u.SnapshotOnSleep = &snapshotOnSleep
			}
			if u.SleepAfter == nil && u.KeepAlive == nil && u.SnapshotOnSleep == nil {
				return &usageError{fmt.Errorf("nothing to set: give --sleep-after, --keep-alive and/or --snapshot-on-sleep")}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			info, err := c.SandboxHandle(args[0]).Update(cmd.Context(), u)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s %s sleep-after=%s keep-alive=%t snapshot-on-sleep=%t\n", info.ID, info.Status, info.SleepAfter, info.KeepAlive, info.SnapshotOnSleep)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&sleepAfter, "sleep-after", 0, "idle time before the sandbox sleeps (e.g. 30s, 10m)")
	fl.BoolVar(&keepAlive, "keep-alive", false, "never sleep when idle (--keep-alive=false to allow it again)")
	fl.BoolVar(&snapshotOnSleep, "snapshot-on-sleep", false, "snapshot the sandbox every time it sleeps (--snapshot-on-sleep=false to stop)")
	return cmd
}
