package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func (a *app) imageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Manage base images",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return &usageError{fmt.Errorf("image: want a subcommand (build, list)")}
		},
	}
	cmd.AddCommand(a.imageBuildCommand(), a.imageListCommand())
	return cmd
}

func (a *app) imageBuildCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "build [NAME]",
		Short: "Build a base image (default: \"default\"); progress goes to stderr",
		Args:  rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			img, err := c.BuildImage(cmd.Context(), name, func(line string) {
				fmt.Fprintln(a.stderr, line)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "image %s (%s) ready, %s\n", img.Name, img.ID, fmtBytes(img.SizeBytes))
			return nil
		},
	}
}

func (a *app) imageListCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List base images",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			imgs, err := c.ListImages(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.stdout, imgs)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tID\tSIZE\tCREATED\tPACKAGES")
			for _, im := range imgs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", im.Name, im.ID, fmtBytes(im.SizeBytes),
					fmtTime(im.CreatedAt), strings.Join(im.Packages, ","))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// fmtBytes renders n bytes with a binary unit, e.g. "1.5 GiB".
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
