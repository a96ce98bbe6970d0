package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

type runFlags struct {
	context string
	lang    string
	timeout time.Duration
	outDir  string
}

func (a *app) runCommand() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run NAME [--context ID] [--lang python|javascript|typescript] [FILE|-]",
		Short: "Run code in a sandbox's code interpreter (created if needed)",
		Long: `Run the code in FILE (or stdin, with - or no FILE) in sandbox NAME's code interpreter,
creating and starting the sandbox if needed. Without --context the code runs in a fresh context of
--lang (default python) that is deleted afterwards; with --context ID it runs in that persistent
context (see the SDK's CreateCodeContext), so variables survive between runs.

stdout and stderr of the code stream to hutch's stdout and stderr as they are printed. Each result
is printed as text (its text/plain form, else its JSON); images (PNG, JPEG, SVG) are saved to files
in --out-dir and their paths printed. An exception prints its traceback to stderr.

Exit codes: 0 the run completed; 1 the code raised an error; 124 --timeout expired (the run was
interrupted); 125 hutch failed; 130 interrupted.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return &usageError{errors.New("run: want NAME [FILE|-]")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			file := "-"
			if len(args) == 2 {
				file = args[1]
			}
			return a.runCode(cmd.Context(), args[0], file, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.context, "context", "c", "", "code context ID (default: a fresh context for this run)")
	fl.StringVarP(&f.lang, "lang", "l", client.LanguagePython, "language of a fresh context: python, javascript or typescript")
	fl.DurationVar(&f.timeout, "timeout", 0, "interrupt the run after this long (e.g. 30s; 0 = no limit)")
	fl.StringVarP(&f.outDir, "out-dir", "o", ".", "directory for saved images")
	return cmd
}

func (a *app) runCode(ctx context.Context, name, file string, f runFlags) error {
	if f.timeout < 0 {
		return &usageError{fmt.Errorf("--timeout %s: must not be negative", f.timeout)}
	}
	var src []byte
	var err error
	if file == "-" {
		src, err = io.ReadAll(a.stdin)
	} else {
		src, err = os.ReadFile(file)
	}
	if err != nil {
		return &exitError{ExitHutchFailed, fmt.Errorf("read code: %w", err)}
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
	opts := &client.RunCodeOptions{Context: f.context, Language: f.lang, Timeout: f.timeout}
	images := 0
	stamp := time.Now().Format("20060102-150405")
	for ev, err := range sb.RunCodeStream(ctx, string(src), opts) {
		if err != nil {
			return execFailure(ctx, err)
		}
		switch ev.Type {
		case client.CodeEventStdout:
			fmt.Fprint(a.stdout, ev.Text)
		case client.CodeEventStderr:
			fmt.Fprint(a.stderr, ev.Text)
		case client.CodeEventResult:
			if err := a.printResult(ev.Result, f.outDir, stamp, &images); err != nil {
				return &exitError{ExitHutchFailed, err}
			}
		case client.CodeEventError:
			for _, l := range ev.Error.Traceback {
				fmt.Fprintln(a.stderr, l)
			}
			if len(ev.Error.Traceback) == 0 {
				fmt.Fprintf(a.stderr, "%s: %s\n", ev.Error.Name, ev.Error.Value)
			}
			if ev.Error.Name == "TimeoutError" {
				return &exitError{ExitTimeout, nil}
			}
			return &exitError{code: 1}
		case client.CodeEventComplete:
			return nil
		}
	}
	return nil
}

// printResult prints a result's text and saves its images.
func (a *app) printResult(r *client.CodeResult, dir, stamp string, images *int) error {
	save := func(ext string, b []byte) error {
		*images++
		p := filepath.Join(dir, fmt.Sprintf("hutch-run-%s-%d.%s", stamp, *images, ext))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fmt.Errorf("save image: %w", err)
		}
		fmt.Fprintf(a.stdout, "[image saved to %s]\n", p)
		return nil
	}
	image := false
	for _, im := range []struct {
		ext string
		b   []byte
	}{{"png", r.PNG}, {"jpg", r.JPEG}, {"svg", []byte(r.SVG)}} {
		if len(im.b) > 0 {
			image = true
			if err := save(im.ext, im.b); err != nil {
				return err
			}
		}
	}
	switch {
	case image:
	case r.JSON != nil && r.Text == "":
		b, _ := json.MarshalIndent(r.JSON, "", "  ")
		fmt.Fprintln(a.stdout, string(b))
	case r.Text != "":
		fmt.Fprintln(a.stdout, r.Text)
	case r.Markdown != "":
		fmt.Fprintln(a.stdout, r.Markdown)
	case r.HTML != "":
		fmt.Fprintln(a.stdout, r.HTML)
	}
	return nil
}
