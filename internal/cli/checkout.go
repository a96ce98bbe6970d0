package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

func (a *app) checkoutCommand() *cobra.Command {
	var session string
	var opts client.GitCheckoutOptions
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "checkout NAME URL",
		Short: "Clone a git repository into a sandbox",
		Long: `Clone the git repository URL (http, https, git, ssh or file) into sandbox NAME, by default
into /workspace/<repository name>.`,
		Args: exactArgs("NAME", "URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			opts.Timeout = timeout
			res, err := a.scope(c, args[0], session).GitCheckout(cmd.Context(), args[1], &opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "cloned %s (branch %s) into %s\n", Printable(res.RepoURL), Printable(res.Branch), Printable(res.TargetDir))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Branch, "branch", "b", "", "branch or tag (default: the remote's default branch)")
	fl.IntVar(&opts.Depth, "depth", 0, "shallow clone of this many commits (0 = full history)")
	fl.StringVar(&opts.TargetDir, "dir", "", "target directory (default /workspace/<repository name>)")
	fl.DurationVar(&timeout, "timeout", 0, "give up after this long (0 = the server default, 10m)")
	fl.StringVarP(&session, "session", "s", "", "session whose cwd resolves a relative --dir")
	return cmd
}
