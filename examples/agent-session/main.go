// Command agent-session is the reference system's flow, end to end, on real input: get the
// sandbox "agent-session-47" by name, clone a Node project into it from a git server on the host
// (smart HTTP, reached through hutchd's operator-approved upstream "git.internal"), run
// `npm install` against the real npm registry through the egress proxy, then `npm test`
// (mocha), streaming all output. It exits with npm test's exit code.
//
// hutchd must know the git server: start it with --upstream git.internal=127.0.0.1:8418 (the
// README's first command does).
package main

import (
	"context"
	"embed"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/gitservetest"
)

//go:embed all:project
var project embed.FS

func main() {
	os.Exit(run())
}

func run() int {
	var (
		url      = flag.String("url", "", "hutchd URL (default: discovered like the CLI)")
		tok      = flag.String("token", "", "API token (default: discovered like the CLI)")
		id       = flag.String("sandbox", "agent-session-47", "sandbox ID")
		gitAddr  = flag.String("git-listen", "127.0.0.1:8418", "address of the example's git server on the host")
		gitHost  = flag.String("git-host", "git.internal", "name the sandbox uses for the git server (an hutchd upstream)")
		keep     = flag.Bool("keep", true, "keep the sandbox afterwards (false: destroy it)")
		deadline = flag.Duration("timeout", 15*time.Minute, "overall deadline")
	)
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, *deadline)
	defer cancelT()

	baseURL, token, err := client.Discover(*url, *tok, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent-session:", err)
		return 2
	}
	c, err := client.New(baseURL, token)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent-session:", err)
		return 2
	}

	sub, _ := fs.Sub(project, "project")
	gitSrv, err := gitservetest.Serve(ctx, sub, "node-demo.git", *gitAddr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent-session: git server:", err)
		return 2
	}
	defer gitSrv.Close()
	step("git server: http://%s/node-demo.git (sandbox sees http://%s/node-demo.git)", *gitAddr, *gitHost)

	t0 := time.Now()
	sb, err := c.Sandbox(ctx, *id, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent-session:", err)
		return 1
	}
	step("sandbox %q ready (created: %v) in %s", sb.ID(), sb.Created(), time.Since(t0).Round(time.Millisecond))
	if !*keep {
		defer sb.Destroy(context.WithoutCancel(ctx))
	}

	dir := "/workspace/node-demo"
	// A re-run starts from a fresh clone.
	if _, err := sb.Exec(ctx, "rm -rf "+dir, nil); err != nil {
		fmt.Fprintln(os.Stderr, "agent-session:", err)
		return 1
	}
	t0 = time.Now()
	res, err := sb.GitCheckout(ctx, "http://"+*gitHost+"/node-demo.git", &client.GitCheckoutOptions{TargetDir: dir, Depth: 1})
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent-session: git checkout:", err)
		return 1
	}
	step("cloned %s (branch %s) into %s in %s", res.RepoURL, res.Branch, res.TargetDir, time.Since(t0).Round(time.Millisecond))

	for _, cmd := range []string{"npm install --no-audit --no-fund", "npm test"} {
		step("$ %s", cmd)
		t0 = time.Now()
		code, err := sb.ExecStreamTo(ctx, cmd, &client.ExecOptions{Cwd: dir}, os.Stdout, os.Stderr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "agent-session: %s: %v\n", cmd, err)
			return 1
		}
		step("%s exited with %d in %s", cmd, code, time.Since(t0).Round(time.Millisecond))
		if code != 0 {
			return code
		}
	}
	step("done: npm test passed in sandbox %q", sb.ID())
	return 0
}

func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "==> "+format+"\n", args...)
}
