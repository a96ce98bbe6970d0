package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/internal/token"
)

// maxTokenInput is the most bytes `hutch token hash` reads from stdin.
const maxTokenInput = 64 << 10

// tokenCommand is `hutch token new|hash`: the API token for hutchd's hash-only mode. Neither
// talks to hutchd.
func (a *app) tokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Make an API token and its hash for hutchd --token-hash-file",
		Long: `By default hutchd keeps its API token in <state>/token (mode 0600) for the local CLI.
With --token-hash-file FILE it keeps only the token's SHA-256 and no token on disk; clients then
pass the token themselves (HUTCH_TOKEN or --token):

  hutch token new --hash-file /etc/hutch/token.sha256 > token.txt   # the token on stdout
  hutchd --token-hash-file /etc/hutch/token.sha256
  HUTCH_TOKEN=$(cat token.txt) hutch list

hutch token hash prints the hash line of a token read from stdin (to hash an existing token:
hutch token hash < /var/lib/hutch/token).`,
	}
	cmd.AddCommand(a.tokenNewCommand(), a.tokenHashCommand())
	return cmd
}

func (a *app) tokenNewCommand() *cobra.Command {
	var hashFile string
	var force bool
	cmd := &cobra.Command{
		Use:   "new",
		Short: "Print a fresh random API token (32 bytes, hex); --hash-file writes its hash",
		Long: `Print a fresh random API token (32 random bytes, 64 hex digits) on stdout. With --hash-file
PATH, also write its hash line (sha256:<hex>) to PATH (mode 0644, refused if PATH exists unless
--force) for hutchd --token-hash-file. Without it, pipe the token: hutch token new | tee token.txt
| hutch token hash > token.sha256.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			tok, err := token.New()
			if err != nil {
				return err
			}
			if hashFile != "" {
				flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
				if force {
					flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
				}
				f, err := os.OpenFile(hashFile, flags, 0o644)
				if errors.Is(err, os.ErrExist) {
					return fmt.Errorf("%s exists: pass --force to replace it (the token it was made for stops working)", hashFile)
				}
				if err != nil {
					return err
				}
				if _, err := fmt.Fprintln(f, token.HashLine(tok)); err != nil {
					f.Close()
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
			}
			_, err = fmt.Fprintln(a.stdout, tok)
			return err
		},
	}
	cmd.Flags().StringVar(&hashFile, "hash-file", "", "also write the token's hash line to this file")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing --hash-file")
	return cmd
}

func (a *app) tokenHashCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "hash",
		Short: "Read a token on stdin, print its hash line (sha256:<hex>) for hutchd --token-hash-file",
		Long: `Read an API token on stdin (surrounding white space, such as the trailing newline, is
ignored) and print its hash line, sha256:<64 hex digits>, the content of a hutchd
--token-hash-file. The token is never taken from the command line, where ps would show it.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := io.ReadAll(io.LimitReader(a.stdin, maxTokenInput+1))
			if err != nil {
				return err
			}
			if len(b) > maxTokenInput {
				return &usageError{fmt.Errorf("stdin holds over %d bytes: want one token", maxTokenInput)}
			}
			tok := strings.TrimSpace(string(b))
			if tok == "" {
				return &usageError{errors.New("no token on stdin: hutch token hash < token.txt")}
			}
			if strings.ContainsAny(tok, " \t\r\n") {
				return &usageError{errors.New("stdin holds more than one word: want one token")}
			}
			_, err = fmt.Fprintln(a.stdout, token.HashLine(tok))
			return err
		},
	}
}
