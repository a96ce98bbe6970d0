package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

// egressCommand is `hutch egress NAME [--set FILE|-] [--patch FILE|-] [--events] [--follow]`.
func (a *app) egressCommand() *cobra.Command {
	var set, patch string
	var events, follow bool
	var since uint64
	cmd := &cobra.Command{
		Use:   "egress NAME",
		Short: "Show or set a sandbox's egress policy, or show its egress audit events",
		Long: `Without flags, print sandbox NAME's egress policy as JSON.

--set FILE replaces the policy with the JSON in FILE ("-" reads stdin); --patch FILE applies a
JSON merge patch (RFC 7386) to it. Both apply at once: connections the new policy no longer
allows are closed. Example:

  echo '{"mode":"allowlist","allow":["packages.example.com","*.github.com"]}' | hutch egress web --set -

--events prints the egress audit events (DNS queries, connections, requests, policy changes) as
JSON lines, from --since; --follow keeps printing new ones until interrupted.`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if set != "" && patch != "" {
				return &usageError{fmt.Errorf("--set and --patch exclude each other")}
			}
			if (set != "" || patch != "") && (events || follow) {
				return &usageError{fmt.Errorf("--set/--patch and --events/--follow exclude each other")}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			sb := c.SandboxHandle(args[0])
			ctx := cmd.Context()
			var p *client.EgressPolicy
			switch {
			case events || follow:
				enc := json.NewEncoder(a.stdout)
				for ev, err := range sb.EgressEvents(ctx, since, follow) {
					if err != nil {
						if ctx.Err() != nil {
							return nil
						}
						return err
					}
					if err := enc.Encode(ev); err != nil {
						return err
					}
				}
				return nil
			case set != "":
				b, err := a.readPolicyFile(set)
				if err != nil {
					return err
				}
				var spec client.EgressPolicy
				dec := json.NewDecoder(strings.NewReader(string(b)))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&spec); err != nil {
					return &usageError{fmt.Errorf("%s: not an egress policy: %w", set, err)}
				}
				p, err = sb.SetEgress(ctx, spec)
				if err != nil {
					return err
				}
			case patch != "":
				b, err := a.readPolicyFile(patch)
				if err != nil {
					return err
				}
				if !json.Valid(b) {
					return &usageError{fmt.Errorf("%s: not valid JSON", patch)}
				}
				p, err = sb.PatchEgress(ctx, json.RawMessage(b))
				if err != nil {
					return err
				}
			default:
				p, err = sb.Egress(ctx)
				if err != nil {
					return err
				}
			}
			enc := json.NewEncoder(a.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(p)
		},
	}
	cmd.Flags().StringVar(&set, "set", "", `replace the policy with the JSON in this file ("-" = stdin)`)
	cmd.Flags().StringVar(&patch, "patch", "", `apply this JSON merge patch file ("-" = stdin)`)
	cmd.Flags().BoolVar(&events, "events", false, "print the egress audit events as JSON lines")
	cmd.Flags().BoolVar(&follow, "follow", false, "with --events: keep printing new events (implies --events)")
	cmd.Flags().Uint64Var(&since, "since", 0, "with --events: only events after this sequence number")
	return cmd
}

// readPolicyFile reads a policy document from path, or stdin for "-" (at most 1 MiB).
func (a *app) readPolicyFile(path string) ([]byte, error) {
	var r io.Reader = a.stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, 1<<20+1))
	if err != nil {
		return nil, err
	}
	if len(b) > 1<<20 {
		return nil, &usageError{fmt.Errorf("%s: policy larger than 1 MiB", path)}
	}
	return b, nil
}
