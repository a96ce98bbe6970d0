package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

// secretCommand is `hutch secret set|list|rm`.
func (a *app) secretCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret",
		Short: "Manage secrets that egress rules inject (values are write-only)",
		Long: `Secrets live only in hutchd, encrypted at rest. Egress rules use them as
"${secrets.NAME}" in injected headers, and placeholders stand in for them inside sandboxes;
no sandbox, log, snapshot or API reply ever holds a value.`,
	}
	cmd.AddCommand(a.secretSetCommand(), a.secretListCommand(), a.secretRmCommand())
	return cmd
}

func (a *app) secretSetCommand() *cobra.Command {
	var fromFile, fromEnv string
	cmd := &cobra.Command{
		Use:   "set NAME",
		Short: "Store or replace a secret; the value is read from stdin (or --from-file, --from-env)",
		Long: `Store or replace secret NAME. The value is read from stdin, never from the command line
(where ps would show it): echo -n "$TOKEN" | hutch secret set GITHUB_TOKEN. One trailing newline
is dropped. --from-file reads a file, --from-env an environment variable of this shell.`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fromFile != "" && fromEnv != "" {
				return &usageError{fmt.Errorf("--from-file and --from-env exclude each other")}
			}
			var r io.Reader = a.stdin
			switch {
			case fromFile != "":
				f, err := os.Open(fromFile)
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			case fromEnv != "":
				v, ok := a.env(fromEnv)
				if !ok {
					return &usageError{fmt.Errorf("environment variable %s is not set", fromEnv)}
				}
				r = strings.NewReader(v)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.SetSecretFrom(cmd.Context(), args[0], r); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "secret %s set\n", args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&fromFile, "from-file", "", "read the value from this file")
	cmd.Flags().StringVar(&fromEnv, "from-env", "", "read the value from this environment variable")
	return cmd
}

func (a *app) secretListCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List secrets (names, times and the sandboxes using them; never values)",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.Secrets(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				if list == nil {
					list = []client.Secret{}
				}
				return writeJSON(a.stdout, list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tUPDATED\tUSED BY")
			for _, s := range list {
				used := strings.Join(s.UsedBy, ",")
				if used == "" {
					used = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, fmtTime(s.UpdatedAt), used)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) secretRmCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"delete"},
		Short:   "Delete a secret (refused while a sandbox's egress policy uses it)",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteSecret(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "secret %s deleted\n", args[0])
			return nil
		},
	}
}
