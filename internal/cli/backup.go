package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

// progressEvery is how often a long backup or restore prints that it is still running.
const progressEvery = 2 * time.Second

// parseTTL reads --ttl: a number of seconds or a Go duration ("72h", "30m").
func parseTTL(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Duration(secs * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, &usageError{fmt.Errorf("--ttl %q: want seconds or a duration like 72h", s)}
	}
	return d, nil
}

// progress prints "<what>… Ns" to w every progressEvery until the returned stop is called.
func progress(w io.Writer, what string) (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "%s… %s\n", what, time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() { close(done); <-ended }
}

// humanBytes formats n bytes as B, KiB, MiB or GiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 2 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMG"[i])
}

func (a *app) backupCommand() *cobra.Command {
	var name, ttl string
	var excludes []string
	var gitignore bool
	cmd := &cobra.Command{
		Use:   "backup NAME DIR",
		Short: "Back up a directory of a sandbox and print the backup's handle as JSON",
		Long: `Archive DIR of sandbox NAME (tar + zstd) into hutchd's blob store and print the backup
as JSON: its "id" and "dir" are the handle that hutch restore takes (the whole JSON works too).
DIR must be absolute and under /workspace, /home, /tmp, /var/tmp or /app.

--exclude takes glob patterns: without "/" they match a name at any depth ("node_modules",
"*.log"); with "/" the path relative to DIR ("build/*.o"); a trailing "/" matches directories
only. --gitignore also leaves out what git ignores in DIR. Progress goes to stderr.`,
		Args: exactArgs("NAME", "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := parseTTL(ttl)
			if err != nil {
				return err
			}
			if ttl != "" && d <= 0 {
				return &usageError{fmt.Errorf("--ttl must be greater than 0")}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			start := time.Now()
			stop := progress(a.stderr, "backing up "+args[1])
			b, err := c.SandboxHandle(args[0]).CreateBackup(cmd.Context(), client.BackupOptions{
				Dir: args[1], Name: name, TTL: d, Excludes: excludes, Gitignore: gitignore,
			})
			stop()
			if err != nil {
				return err
			}
			for _, w := range b.Warnings {
				fmt.Fprintln(a.stderr, "warning:", Printable(w))
			}
			fmt.Fprintf(a.stderr, "backed up %s: %s in %s\n", Printable(b.Dir), humanBytes(b.SizeBytes), time.Since(start).Round(time.Millisecond))
			return writeJSON(a.stdout, b)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&name, "name", "", "label of the backup (up to 256 characters)")
	fl.StringVar(&ttl, "ttl", "", "how long the backup is kept: seconds or a duration like 72h (default 3 days)")
	fl.StringArrayVar(&excludes, "exclude", nil, "glob pattern of entries to leave out (repeatable)")
	fl.BoolVar(&gitignore, "gitignore", false, "also leave out what git ignores in DIR")
	return cmd
}

// parseHandle reads a backup handle: an ID, or the JSON hutch backup prints ("-": from stdin).
func parseHandle(arg string, stdin io.Reader) (string, error) {
	text := strings.TrimSpace(arg)
	if text == "-" {
		b, err := io.ReadAll(io.LimitReader(stdin, 1<<20))
		if err != nil {
			return "", err
		}
		text = strings.TrimSpace(string(b))
	}
	if !strings.HasPrefix(text, "{") {
		return text, nil
	}
	var h struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(text), &h); err != nil || h.ID == "" {
		return "", &usageError{fmt.Errorf("handle is not an ID nor a backup's JSON with an \"id\"")}
	}
	return h.ID, nil
}

func (a *app) restoreCommand() *cobra.Command {
	var dir, mode string
	cmd := &cobra.Command{
		Use:   "restore NAME HANDLE_OR_ID",
		Short: "Restore a backup into a directory of a sandbox",
		Long: `Replace the content of a directory of sandbox NAME with a backup's. HANDLE_OR_ID is the
backup's ID, the JSON hutch backup printed, or "-" to read that JSON from stdin. The directory is
the one backed up unless --dir names another; the backup may come from any sandbox. By default
the directory becomes a copy-on-write mount of the backup (instant once the host has the backup
extracted; it lasts across sleep and restarts); --mode copy extracts the files into the
sandbox's disk instead, and on failure leaves the directory as it was. Progress goes to stderr.`,
		Args: exactArgs("NAME", "HANDLE_OR_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseHandle(args[1], a.stdin)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			start := time.Now()
			stop := progress(a.stderr, "restoring "+id)
			r, err := c.SandboxHandle(args[0]).RestoreBackupWith(cmd.Context(), id, client.RestoreOptions{Dir: dir, Mode: mode})
			stop()
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "restored %s into %s (%s) in %s\n", r.ID, Printable(r.Dir), r.Mode, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to restore into (default: the backed-up directory)")
	cmd.Flags().StringVar(&mode, "mode", "", `"mount" or "copy" (default: mount where the host can)`)
	return cmd
}

func (a *app) backupsCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "backups [NAME]",
		Short: "List backups (of sandbox NAME, or all)",
		Args:  rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			sandbox := ""
			if len(args) == 1 {
				sandbox = args[0]
			}
			list, err := c.ListBackups(cmd.Context(), sandbox)
			if err != nil {
				return err
			}
			if asJSON {
				if list == nil {
					list = []client.Backup{}
				}
				return writeJSON(a.stdout, list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSANDBOX\tDIR\tNAME\tSIZE\tCREATED\tEXPIRES")
			for _, b := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.ID, b.SandboxID, b.Dir, b.Name, humanBytes(b.SizeBytes),
					b.CreatedAt.Local().Format(time.DateTime), b.ExpiresAt.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) backupDeleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "backup-delete ID",
		Short: "Delete a backup (its archive and record)",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteBackup(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s deleted\n", args[0])
			return nil
		},
	}
}

// backupCommands are the backup commands for the root command.
func (a *app) backupCommands() []*cobra.Command {
	return []*cobra.Command{a.backupCommand(), a.restoreCommand(), a.backupsCommand(), a.backupDeleteCommand()}
}
