package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
)

type execFlags struct {
	session string
	cwd     string
	env     []string
	timeout time.Duration
	stdin   bool
}

func (a *app) execCommand() *cobra.Command {
	var f execFlags
	cmd := &cobra.Command{
		Use:   "exec NAME [flags] -- CMD [ARG...]",
		Short: "Run a command in a sandbox (created if needed), streaming its output",
		Long: `Run a command in sandbox NAME, creating and starting the sandbox if needed. The command's
stdout and stderr are streamed to hutch's stdout and stderr as they are produced, and hutch exits
with the command's exit code.

A single CMD argument is passed to bash verbatim, so shell syntax works:
  hutch exec box -- 'cd /tmp && echo $HOME | wc -c'
Several arguments are quoted one by one and run as a plain command:
  hutch exec box -- printf '%s\n' 'a b' c

When the sandbox knows why a killed command died (out of memory), hutch says so on stderr:
  hutch: the command was killed (exit 137): oom-killed

Exit codes: the command's own; 124 when --timeout expired (the command's whole process tree
is killed); 125 when hutch failed (hutchd unreachable, the sandbox could not start, the stream
was cut before the command finished); 130 when interrupted.`,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if len(args) < 2 || (dash >= 0 && dash != 1) {
				return &usageError{errors.New("exec: want NAME -- CMD [ARG...]")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runExec(cmd.Context(), args[0], args[1:], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.session, "session", "s", "", "session ID (default: the default session)")
	fl.StringVarP(&f.cwd, "cwd", "w", "", "working directory of this command (default: the session's)")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "environment variable K=V for this command (repeatable)")
	fl.DurationVar(&f.timeout, "timeout", 0, "kill the command after this long (e.g. 30s; 0 = no limit)")
	fl.BoolVarP(&f.stdin, "stdin", "i", false, "read hutch's stdin to the end and pass it to the command")
	return cmd
}

func (a *app) runExec(ctx context.Context, name string, argv []string, f execFlags) error {
	env, err := parseEnv(f.env)
	if err != nil {
		return err
	}
	if f.timeout < 0 {
		return &usageError{fmt.Errorf("--timeout %s: must not be negative", f.timeout)}
	}
	opts := &client.ExecOptions{SessionID: f.session, Cwd: f.cwd, Env: env, Timeout: f.timeout}
	if f.stdin {
		b, err := io.ReadAll(a.stdin)
		if err != nil {
			return &exitError{ExitHutchFailed, fmt.Errorf("read stdin: %w", err)}
		}
		opts.Stdin = b
	}
	c, err := a.client()
	if err != nil {
		return &exitError{ExitHutchFailed, err}
	}
	sb, err := c.Sandbox(ctx, name, nil)
	if err != nil {
		return execFailure(ctx, err)
	}
	a.noteCreated(sb, name)
	ev, err := sb.ExecStreamComplete(ctx, JoinCommand(argv), opts, a.stdout, a.stderr)
	if err != nil {
		return execFailure(ctx, err)
	}
	if ev.Reason != "" {
		fmt.Fprintf(a.stderr, "hutch: the command was killed (exit %d): %s\n", ev.ExitCode, Printable(ev.Reason))
	}
	return &exitError{code: ev.ExitCode}
}

// execFailure picks hutch exec's exit code for err.
func execFailure(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		// Ctrl-C is the user's own doing: say so plainly, without the stream's error code.
		return &exitError{ExitInterrupted, errors.New("interrupted")}
	case errdefs.IsCode(err, errdefs.CodeCommandTimeout):
		return &exitError{ExitTimeout, err}
	default:
		return &exitError{ExitHutchFailed, err}
	}
}

// JoinCommand turns exec's CMD arguments into one bash command line. A single argument is
// returned verbatim (it may use shell syntax); several are each quoted with single quotes so
// bash sees exactly these words.
func JoinCommand(argv []string) string {
	if len(argv) == 1 {
		return argv[0]
	}
	quoted := make([]string, len(argv))
	for i, arg := range argv {
		quoted[i] = shellQuote(arg)
	}
	return strings.Join(quoted, " ")
}

// shellQuote quotes s for bash in single quotes; an embedded single quote closes the quoted
// part, is escaped with a backslash, and reopens it.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// parseEnv parses K=V assignments; V may be empty or contain "=".
func parseEnv(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, &usageError{fmt.Errorf("--env %q: want KEY=VALUE", kv)}
		}
		env[k] = v
	}
	return env, nil
}

// noteCreated says on stderr that the get-or-create call behind a command made sandbox name:
// a mistyped name would otherwise run the command in a new, empty sandbox without a word.
func (a *app) noteCreated(sb *client.Sandbox, name string) {
	if sb.Created() {
		fmt.Fprintf(a.stderr, "hutch: created sandbox %s (none had that name; 'hutch destroy %s' removes it)\n", name, name)
	}
}
