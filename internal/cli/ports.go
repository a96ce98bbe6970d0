package cli

import (
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

// parsePort parses a PORT argument; the range is checked by hutchd (1024–65535).
func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 65535 {
		return 0, &usageError{fmt.Errorf("port %q: want a number 1-65535", s)}
	}
	return n, nil
}

func (a *app) exposeCommand() *cobra.Command {
	var name, token string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "expose NAME PORT",
		Short: "Expose a port of a sandbox at a preview URL and print the URL",
		Long: `Make PORT (1024-65535) of sandbox NAME reachable from outside at a preview URL
({port}-{sandbox}-{token}.{domain}) and print the URL. Requests to it are proxied to the port
inside the sandbox, which is started if it is stopped. Exposing an exposed port again prints the
same URL; a different --token for it is an error (PORT_ALREADY_EXPOSED).`,
		Args: exactArgs("NAME", "PORT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := parsePort(args[1])
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.SandboxHandle(args[0]).ExposePort(cmd.Context(), port, client.ExposeOptions{Name: name, Token: token})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.stdout, p)
			}
			fmt.Fprintln(a.stdout, p.URL)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&name, "name", "", "label of the port (up to 63 printable characters)")
	fl.StringVar(&token, "token", "", "URL token, 8-16 of [a-z0-9_] (default: random, 16)")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) unexposeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "unexpose NAME PORT",
		Short: "Remove the preview URL of a sandbox port",
		Args:  exactArgs("NAME", "PORT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := parsePort(args[1])
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.SandboxHandle(args[0]).UnexposePort(cmd.Context(), port); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%d unexposed\n", port)
			return nil
		},
	}
}

func (a *app) portsCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ports NAME",
		Short: "List the exposed ports of a sandbox",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.SandboxHandle(args[0]).ExposedPorts(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				if list == nil {
					list = []client.ExposedPort{}
				}
				return writeJSON(a.stdout, list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PORT\tNAME\tURL\tEXPOSED")
			for _, p := range list {
				label := p.Name
				if label == "" {
					label = "-"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", p.Port, Printable(label), p.URL, fmtTime(p.ExposedAt))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
