package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
)

// watchLine is the --json form of one watch stream item.
type watchLine struct {
	Type        string         `json:"type"`
	WatchID     string         `json:"watchId,omitempty"`
	EventType   string         `json:"eventType,omitempty"`
	Path        string         `json:"path,omitempty"`
	IsDirectory *bool          `json:"isDirectory,omitempty"`
	Timestamp   time.Time      `json:"timestamp,omitzero"`
	Dropped     *int           `json:"dropped,omitempty"`
	Code        string         `json:"code,omitempty"`
	Message     string         `json:"message,omitempty"`
	Context     map[string]any `json:"context,omitempty"`
	Reason      string         `json:"reason,omitempty"`
}

func (a *app) watchCommand() *cobra.Command {
	var include, exclude []string
	var noRecursive, noDefaultExcludes, asJSON bool
	cmd := &cobra.Command{
		Use:   "watch NAME PATH",
		Short: "Print file changes below a directory of a sandbox as they happen",
		Long: `Watch directory PATH of sandbox NAME (absolute; below /workspace, /home, /tmp, /var/tmp or
/app) and print one line per change: "<type> <path>", type being create, modify, delete,
move_from, move_to or attrib, and directories ending in "/". Directories below PATH are watched
too, including new ones, unless --no-recursive. Changes of one path within about 50 ms are
printed once.

Globs (path.Match syntax) match the path relative to PATH ("src/*.ts") or any one segment of it
("*.ts", "dist"). --exclude adds to the default excludes (.git, node_modules) unless
--no-default-excludes; excluded directories are not watched at all. --include, when given,
prints only matching paths.

"overflow: ..." means changes were lost (hutch fell behind): rescan. The command ends with
"stopped: <reason>" (exit 0) when PATH is deleted or moved away, and on Ctrl-C (exit 0).
--json prints one JSON object per line: {"type":"watching"|"event"|"overflow"|"error"|"stopped",…}.
The sandbox stays awake while the command runs.`,
		Args: exactArgs("NAME", "PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			opts := client.WatchOptions{NoRecursive: noRecursive, Include: include, Exclude: []string{}}
			if !noDefaultExcludes {
				opts.Exclude = append(opts.Exclude, client.DefaultWatchExcludes...)
			}
			for _, e := range exclude {
				if !slices.Contains(opts.Exclude, e) {
					opts.Exclude = append(opts.Exclude, e)
				}
			}
			return a.runWatch(cmd.Context(), c.SandboxHandle(args[0]), args[1], opts, asJSON)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&include, "include", nil, "print only paths matching this glob (repeatable)")
	fl.StringArrayVar(&exclude, "exclude", nil, "leave out paths matching this glob (repeatable)")
	fl.BoolVar(&noDefaultExcludes, "no-default-excludes", false, "do not exclude .git and node_modules")
	fl.BoolVar(&noRecursive, "no-recursive", false, "watch PATH only, not the directories below it")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object per line")
	return cmd
}

// runWatch prints the watch stream until it stops, ctx ends (a clean exit) or it fails.
func (a *app) runWatch(ctx context.Context, sb *client.Sandbox, path string, opts client.WatchOptions, asJSON bool) error {
	w, err := sb.Watch(ctx, path, opts)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer w.Close()
	emit := func(l watchLine) error {
		b, err := json.Marshal(l)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(a.stdout, "%s\n", b)
		return err
	}
	if asJSON {
		if err := emit(watchLine{Type: "watching", WatchID: w.ID(), Path: w.Path()}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stderr, "watching %s (%s)\n", Printable(w.Path()), Printable(w.ID()))
	}
	for ev, err := range w.Events() {
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil
			}
			return err
		}
		if asJSON {
			l := watchLine{Type: ev.Kind, EventType: ev.EventType, Path: ev.Path, Timestamp: ev.Timestamp, Reason: ev.Reason}
			switch ev.Kind {
			case client.WatchKindEvent:
				l.IsDirectory = &ev.IsDirectory
			case client.WatchKindOverflow:
				l.Dropped = &ev.Dropped
			case client.WatchKindError:
				l.Message = ev.Err.Error()
				if e := errdefsOf(ev.Err); e != nil {
					l.Code, l.Context = string(e.Code), e.Context
				}
			}
			if err := emit(l); err != nil {
				return err
			}
			continue
		}
		switch ev.Kind {
		case client.WatchKindEvent:
			p := ev.Path
			if ev.IsDirectory {
				p += "/"
			}
			if _, err := fmt.Fprintf(a.stdout, "%s %s\n", Printable(ev.EventType), Printable(p)); err != nil {
				return err
			}
		case client.WatchKindOverflow:
			if ev.Dropped < 0 {
				fmt.Fprintln(a.stdout, "overflow: the kernel's event queue overflowed; changes were lost")
			} else {
				fmt.Fprintf(a.stdout, "overflow: %d changes were lost\n", ev.Dropped)
			}
		case client.WatchKindError:
			fmt.Fprintln(a.stderr, FormatError(ev.Err))
		case client.WatchKindStopped:
			fmt.Fprintf(a.stdout, "stopped: %s\n", Printable(ev.Reason))
		}
	}
	return nil
}

// errdefsOf returns the *errdefs.Error in err's chain, or nil.
func errdefsOf(err error) *errdefs.Error {
	var e *errdefs.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
