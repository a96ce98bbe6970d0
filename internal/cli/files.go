package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

func (a *app) writeCommand() *cobra.Command {
	var session string
	cmd := &cobra.Command{
		Use:   "write NAME PATH",
		Short: "Write stdin to a file in a sandbox (any size, streamed)",
		Long: `Write hutch's stdin to PATH in sandbox NAME, creating parent directories. The data is
streamed, so it may be of any size; the file is replaced atomically. A relative PATH resolves
against the session's working directory.`,
		Args: exactArgs("NAME", "PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			_, err = a.scope(c, args[0], session).WriteFileFrom(cmd.Context(), args[1], a.stdin)
			return err
		},
	}
	cmd.Flags().StringVarP(&session, "session", "s", "", "session whose cwd resolves a relative PATH")
	return cmd
}

func (a *app) readCommand() *cobra.Command {
	var session string
	cmd := &cobra.Command{
		Use:   "read NAME PATH",
		Short: "Copy a file of a sandbox to stdout (any size, streamed)",
		Args:  exactArgs("NAME", "PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			body, _, err := a.scope(c, args[0], session).OpenFile(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			defer body.Close()
			if _, err := io.Copy(a.stdout, body); err != nil {
				return fmt.Errorf("read %s in sandbox %q: %w", args[1], args[0], err)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&session, "session", "s", "", "session whose cwd resolves a relative PATH")
	return cmd
}

func (a *app) lsCommand() *cobra.Command {
	var session string
	var recursive, all, asJSON bool
	cmd := &cobra.Command{
		Use:   "ls NAME [PATH]",
		Short: "List a directory of a sandbox (default: the session's cwd)",
		Args:  rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "."
			if len(args) == 2 {
				path = args[1]
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			files, err := a.scope(c, args[0], session).ListFiles(cmd.Context(), path,
				&client.ListOptions{Recursive: recursive, IncludeHidden: all})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.stdout, files)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			for _, f := range files {
				name := f.RelativePath
				if name == "" {
					name = f.Name
				}
				if f.Type == client.FileTypeDirectory {
					name += "/"
				}
				fmt.Fprintf(tw, "%s%s\t%d\t%s\t%s\n", typeLetter(f.Type), f.Mode, f.Size, fmtTime(f.ModifiedAt), Printable(name))
			}
			return tw.Flush()
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&session, "session", "s", "", "session whose cwd resolves a relative PATH")
	fl.BoolVarP(&recursive, "recursive", "R", false, "list the whole tree")
	fl.BoolVarP(&all, "all", "a", false, "include names starting with a dot")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func typeLetter(t client.FileType) string {
	switch t {
	case client.FileTypeDirectory:
		return "d"
	case client.FileTypeSymlink:
		return "l"
	case client.FileTypeFile:
		return "-"
	default:
		return "?"
	}
}

// scope is what the file and git commands need; *client.Sandbox (default session) and
// *client.Session both have it.
type scope interface {
	WriteFileFrom(ctx context.Context, path string, r io.Reader) (int64, error)
	OpenFile(ctx context.Context, path string) (io.ReadCloser, *client.FileMeta, error)
	ListFiles(ctx context.Context, path string, opts *client.ListOptions) ([]client.FileInfo, error)
	GitCheckout(ctx context.Context, repoURL string, opts *client.GitCheckoutOptions) (*client.GitCheckoutResult, error)
}

// scope returns sandbox name's default session, or the given session.
func (a *app) scope(c *client.Client, name, session string) scope {
	sb := c.SandboxHandle(name)
	if session == "" {
		return sb
	}
	return sb.Session(session)
}
