package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

// snapshotCommands are `hutch snapshot NAME`, `hutch fork NAME N` and
// `hutch restore-snapshot NAME SNAPSHOT` and `hutch snapshot-delete SNAPSHOT`.
func (a *app) snapshotCommands() []*cobra.Command {
	return []*cobra.Command{a.snapshotCommand(), a.forkCommand(), a.restoreSnapshotCommand(), a.snapshotDeleteCommand()}
}

func (a *app) snapshotCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "snapshot NAME",
		Short: "Snapshot a sandbox's whole disk and configuration; prints the snapshot ID",
		Long: `Capture sandbox NAME's whole disk (every change since its image, deletions included) and
its configuration as a content-addressed snapshot in hutchd's blob store, and print its ID
(sha256-…) alone on stdout (its layer count and size go to stderr). A running sandbox is
frozen while its disk is read. Start a sandbox from it with 'hutch create NEW --snapshot ID'
or the SDK, or reset a sandbox to it with 'hutch restore-snapshot'.`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			snap, err := c.SandboxHandle(args[0]).Snapshot(cmd.Context())
			if err != nil {
				return err
			}
			// The ID alone on stdout, so that ID=$(hutch snapshot NAME) works; the figures on
			// stderr.
			fmt.Fprintln(a.stdout, snap.ID)
			fmt.Fprintf(a.stderr, "hutch: snapshot of %s: %d layers, %d bytes\n", args[0], len(snap.Layers), snap.SizeBytes)
			return nil
		},
	}
}

func (a *app) forkCommand() *cobra.Command {
	var prefix string
	cmd := &cobra.Command{
		Use:   "fork NAME N [--prefix P]",
		Short: "Snapshot a sandbox and start N sandboxes from the snapshot in parallel",
		Long: `Snapshot sandbox NAME once and start N sandboxes (1-64) from the snapshot in parallel,
named NAME-fork-1 … NAME-fork-N (or P-1 … P-N with --prefix). Each has NAME's disk and
configuration and writes to a disk of its own. Prints one line per fork and the timings.`,
		Args: exactArgs("NAME", "N"),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 1 {
				return &usageError{fmt.Errorf("N must be a positive number, got %q", args[1])}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			res, err := c.SandboxHandle(args[0]).Fork(cmd.Context(), n, &client.ForkOptions{Prefix: prefix})
			if err != nil {
				return err
			}
			for _, f := range res.Sandboxes {
				fmt.Fprintf(a.stdout, "%s %s %.0fms\n", f.ID, f.Status, f.StartMs)
			}
			fmt.Fprintf(a.stdout, "snapshot %s in %.0fms; %d forks in %.0fms; total %.0fms\n",
				res.Snapshot.ID, res.SnapshotMs, len(res.Sandboxes), res.ForkMs, res.TotalMs)
			return nil
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "name forks P-1 … P-N (default NAME-fork)")
	return cmd
}

func (a *app) restoreSnapshotCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "restore-snapshot NAME SNAPSHOT",
		Short: "Reset a sandbox's disk to a snapshot (changes since are discarded)",
		Long: `Stop sandbox NAME if it runs, discard its disk's changes, rebuild its disk on SNAPSHOT
(an ID printed by 'hutch snapshot') and start it again. Its settings and exposed ports stay.`,
		Args: exactArgs("NAME", "SNAPSHOT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			info, err := c.SandboxHandle(args[0]).RestoreSnapshot(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s %s snapshot=%s\n", info.ID, info.Status, info.Snapshot)
			return nil
		},
	}
}

func (a *app) snapshotDeleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "snapshot-delete SNAPSHOT",
		Short: "Delete a snapshot; layers nothing else uses are deleted from the blob store",
		Long: `Delete snapshot SNAPSHOT (an ID printed by 'hutch snapshot'). Its layers stay while another
snapshot lists them or a sandbox's disk is built on them; the others are deleted from the blob
store. Sandboxes created from the snapshot keep working.`,
		Args: exactArgs("SNAPSHOT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteSnapshot(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s deleted\n", args[0])
			return nil
		},
	}
}
