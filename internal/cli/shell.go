package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hutchdev/hutch/client"
)

// detachKey starts the detach sequence of hutch shell: Ctrl-] then d. Ctrl-] twice sends one
// Ctrl-]; Ctrl-] then any other key sends both.
const (
	detachKey    = 0x1d // Ctrl-]
	detachSecond = 'd'
	// DefaultTerminal is the terminal hutch shell attaches to without --terminal.
	DefaultTerminal = "main"
)

type shellFlags struct {
	terminal, session, shell string
}

func (a *app) shellCommand() *cobra.Command {
	var f shellFlags
	cmd := &cobra.Command{
		Use:   "shell NAME",
		Short: "Attach this terminal to a shell in a sandbox (created if needed)",
		Long: `Attach the local terminal to terminal ID (--terminal, default "` + DefaultTerminal + `") of sandbox NAME,
creating and starting the sandbox and the terminal if needed. The shell starts in the session's
cwd and environment (--session) and keeps running when you detach: attaching again shows the
recent output (up to 1 MiB) and continues where it was.

Detach with Ctrl-] then d. (Ctrl-] twice sends one Ctrl-].) The local terminal is in raw mode
while attached and window size changes are passed on. hutch shell exits with the shell's exit
code when the shell exits, 0 when you detach, 1 when the connection fails.`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runShell(cmd.Context(), args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.terminal, "terminal", "t", DefaultTerminal, "terminal ID (1-64 of [a-z0-9_-])")
	fl.StringVarP(&f.session, "session", "s", "", "session whose cwd and environment a new terminal's shell starts with (default: the default session)")
	fl.StringVar(&f.shell, "shell", "", "shell of a new terminal, an absolute path in the sandbox (default /bin/bash)")
	return cmd
}

func (a *app) runShell(ctx context.Context, name string, f shellFlags) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	sb, err := c.Sandbox(ctx, name, nil)
	if err != nil {
		return err
	}
	a.noteCreated(sb, name)
	in, _ := a.stdin.(*os.File)
	out, _ := a.stdout.(*os.File)
	tty := in != nil && term.IsTerminal(int(in.Fd()))
	size := func() (int, int, bool) {
		for _, f := range []*os.File{out, in} {
			if f != nil {
				if w, h, err := term.GetSize(int(f.Fd())); err == nil && w > 0 && h > 0 {
					return w, h, true
				}
			}
		}
		return 0, 0, false
	}
	opts := client.TerminalOptions{Session: f.session, Shell: f.shell}
	if w, h, ok := size(); ok {
		opts.Cols, opts.Rows = min(w, 1000), min(h, 1000)
	}
	t, err := sb.Terminal(ctx, f.terminal, opts)
	if err != nil {
		return err
	}
	defer t.Close()
	if r := t.Ready(); r.ReplayBytes > 0 && tty {
		fmt.Fprint(a.stdout, "\x1bc") // reset the screen: the replay redraws it
	}
	if opts.Cols > 0 && (t.Ready().Cols != opts.Cols || t.Ready().Rows != opts.Rows) {
		_ = t.Resize(opts.Cols, opts.Rows)
	}
	if tty {
		state, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return fmt.Errorf("raw mode: %w", err)
		}
		defer func() { _ = term.Restore(int(in.Fd()), state) }()
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	outDone := make(chan error, 1)
	go func() {
		_, err := io.Copy(a.stdout, t)
		outDone <- err
	}()
	detached := make(chan struct{})
	go a.shellInput(t, detached)
	go func() {
		for ev := range t.Events() {
			if ev.Type == "error" && ev.Err != nil {
				fmt.Fprintf(a.stderr, "\r\nhutch: terminal: %s\r\n", Printable(ev.Err.Error()))
			}
		}
	}()
	for {
		select {
		case <-winch:
			if w, h, ok := size(); ok {
				_ = t.Resize(min(w, 1000), min(h, 1000))
			}
		case <-detached:
			fmt.Fprintf(a.stderr, "\r\n[detached from terminal %s; reattach with: hutch shell %s --terminal %s]\r\n", f.terminal, name, f.terminal)
			return nil
		case err := <-outDone:
			if code, ok := t.ExitCode(); ok {
				if code == 0 {
					return nil
				}
				return &exitError{code: code}
			}
			if err == nil {
				err = errors.New("terminal connection closed")
			}
			return fmt.Errorf("terminal %s: %w", f.terminal, err)
		case <-ctx.Done():
			return &exitError{code: ExitInterrupted}
		}
	}
}

// shellInput copies stdin to the terminal, watching for the detach sequence; it closes
// detached when it sees it. At EOF of stdin it stops sending (the shell runs on until it exits).
func (a *app) shellInput(t *client.Terminal, detached chan<- struct{}) {
	buf := make([]byte, 32<<10)
	escaped := false
	for {
		n, err := a.stdin.Read(buf)
		out := make([]byte, 0, n+1)
		for _, b := range buf[:n] {
			switch {
			case escaped && b == detachSecond:
				if len(out) > 0 {
					_, _ = t.Write(out)
				}
				close(detached)
				return
			case escaped && b == detachKey:
				out = append(out, detachKey)
				escaped = false
			case escaped:
				out = append(out, detachKey, b)
				escaped = false
			case b == detachKey:
				escaped = true
			default:
				out = append(out, b)
			}
		}
		if len(out) > 0 {
			if _, werr := t.Write(out); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (a *app) terminalsCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "terminals NAME",
		Short: "List the terminals of a sandbox",
		Long: `List the terminals of sandbox NAME (see hutch shell): running ones and exited ones not yet
replaced or killed. EXIT is "-" while the shell runs.`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.SandboxHandle(args[0]).ListTerminals(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				if list == nil {
					list = []client.TerminalInfo{}
				}
				return writeJSON(a.stdout, list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSESSION\tPID\tSIZE\tVIEWERS\tEXIT\tCREATED")
			for _, t := range list {
				exit := "-"
				if t.ExitCode != nil {
					exit = fmt.Sprint(*t.ExitCode)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%dx%d\t%d\t%s\t%s\n", Printable(t.ID), Printable(t.Session), t.PID, t.Cols, t.Rows, t.Viewers, exit, fmtTime(t.CreatedAt))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) terminalKillCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "terminal-kill NAME ID",
		Short: "Kill a terminal of a sandbox",
		Long: `Kill terminal ID of sandbox NAME: SIGHUP to its shell and the shell's processes, SIGKILL
to those left after a grace period. Attached viewers see the exit. Unknown ID: exit 1
(TERMINAL_NOT_FOUND).`,
		Args: exactArgs("NAME", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			in, err := c.SandboxHandle(args[0]).KillTerminal(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			exit := "-"
			if in.ExitCode != nil {
				exit = fmt.Sprint(*in.ExitCode)
			}
			fmt.Fprintf(a.stdout, "%s killed (exit %s)\n", Printable(in.ID), exit)
			return nil
		},
	}
}
