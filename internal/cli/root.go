// Package cli implements the hutch command-line tool: cobra commands that talk to hutchd only
// through the public SDK (package client).
//
// Exit codes: 0 success; 1 an error (printed to stderr as "hutch: <message> (<CODE>)"); 2 a
// usage error. hutch exec exits with the command's own exit code, 124 when its --timeout
// expired, 125 when hutch itself failed (hutchd unreachable, sandbox not startable, stream cut
// before the command finished), and 130 when interrupted.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
)

// Exit codes of hutch.
const (
	ExitOK          = 0
	ExitError       = 1
	ExitUsage       = 2
	ExitTimeout     = 124 // hutch exec: the command's --timeout expired (as timeout(1))
	ExitHutchFailed = 125 // hutch exec: hutch itself failed (as docker run)
	ExitInterrupted = 130 // hutch exec: interrupted by SIGINT/SIGTERM
)

// Env looks up an environment variable, like os.LookupEnv.
type Env func(key string) (string, bool)

// app is the state of one invocation: streams, environment and global flags.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	env            Env

	// Global flags.
	url, token string
	debug      bool
}

// exitError makes Main exit with code. A nil err means the message was already shown (or
// there is none, as for a command's own exit code).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError marks a bad command line (exit code 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// Main runs hutch with args (without the program name) and returns the process exit code.
// ctx should be cancelled on SIGINT/SIGTERM; env is the environment (os.LookupEnv).
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env Env) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, env: env}
	root := a.rootCommand()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return a.report(err)
}

// report prints err (if it has a message) and returns the exit code for it.
func (a *app) report(err error) int {
	if err == nil {
		return ExitOK
	}
	code := ExitError
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		err = ee.err
	}
	var ue *usageError
	if errors.As(err, &ue) {
		code = ExitUsage
	}
	if err != nil {
		fmt.Fprintln(a.stderr, FormatError(err))
		if ue != nil {
			fmt.Fprintln(a.stderr, "Run 'hutch --help' for usage.")
		}
	}
	return code
}

// FormatError renders err as hutch prints it: "hutch: <message> (<CODE>)", the code being the
// stable errdefs code when err carries one.
func FormatError(err error) string {
	// Messages quote sandbox paths and names (Printable).
	var e *errdefs.Error
	if errors.As(err, &e) {
		return fmt.Sprintf("hutch: %s (%s)", Printable(err.Error()), Printable(string(e.Code)))
	}
	return "hutch: " + Printable(err.Error())
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "hutch",
		Short: "Control Hutch sandboxes",
		Long: `hutch talks to hutchd, the Hutch sandbox daemon.

hutchd is found with --url/--token, else HUTCH_URL/HUTCH_TOKEN, else the files hutchd writes in
its state directory (HUTCH_STATE_DIR, default /var/lib/hutch): hutchd.json ({"url": …}) and
token; the URL defaults to ` + client.DefaultURL + `. A hutchd in hash-only mode
(--token-hash-file, see hutch token) keeps no token file: pass HUTCH_TOKEN or --token.

Exit codes: 0 success, 1 error, 2 usage error. hutch exec exits with the command's exit code,
124 when --timeout expired, 125 when hutch itself failed, 130 when interrupted.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// An unknown subcommand is a usage error (exit 2), not a plain one.
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &usageError{fmt.Errorf("unknown command %q", args[0])}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.url, "url", "", "hutchd URL (default: $HUTCH_URL, <state>/hutchd.json, "+client.DefaultURL+")")
	pf.StringVar(&a.token, "token", "", "API token (default: $HUTCH_TOKEN, <state>/token)")
	pf.BoolVar(&a.debug, "debug", false, "log each API request to stderr")
	root.AddCommand(
		a.execCommand(),
		a.createCommand(),
		a.listCommand(),
		a.statusCommand(),
		a.startCommand(),
		a.stopCommand(),
		a.destroyCommand(),
		a.writeCommand(),
		a.readCommand(),
		a.lsCommand(),
		a.checkoutCommand(),
		a.imageCommand(),
		a.spawnCommand(),
		a.psCommand(),
		a.logsCommand(),
		a.killCommand(),
		a.exposeCommand(),
		a.unexposeCommand(),
		a.portsCommand(),
		a.sleepCommand(), a.wakeCommand(), a.setCommand(),
		a.shellCommand(), a.terminalsCommand(), a.terminalKillCommand(),
	)
	root.AddCommand(a.backupCommands()...)
	root.AddCommand(a.snapshotCommands()...)
	root.AddCommand(a.watchCommand())
	root.AddCommand(a.runCommand())
	root.AddCommand(a.secretCommand())
	root.AddCommand(a.egressCommand())
	root.AddCommand(a.tokenCommand())
	return root
}

// client builds an SDK client for the discovered hutchd.
func (a *app) client() (*client.Client, error) {
	t, err := discover(a.url, a.token, a.env)
	if err != nil {
		return nil, err
	}
	opts := []client.Option{client.WithUserAgent("hutch-cli")}
	if a.debug {
		opts = append(opts, client.WithLogger(slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	return client.New(t.URL, t.Token, opts...)
}

// exactArgs is cobra.ExactArgs with usage-error classification and argument names.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return &usageError{fmt.Errorf("%s: want %d argument(s) (%v), got %d", cmd.CommandPath(), len(names), names, len(args))}
		}
		return nil
	}
}

// rangeArgs accepts between min and max arguments.
func rangeArgs(minN, maxN int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < minN || len(args) > maxN {
			return &usageError{fmt.Errorf("%s: want %d to %d arguments, got %d", cmd.CommandPath(), minN, maxN, len(args))}
		}
		return nil
	}
}
