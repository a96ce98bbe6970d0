// Command hutchd is the Hutch daemon: it runs sandboxes for AI agents on this host (runc,
// overlayfs, a network namespace and egress proxy per sandbox) and serves the /v1 API. See
// README.md and api/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hutchdev/hutch/internal/config"
	"github.com/hutchdev/hutch/internal/daemon"
)

func main() {
	cfg, err := config.Load(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hutchd:", err)
		os.Exit(2)
	}
	os.Exit(run(cfg))
}

func run(cfg config.Config) int {
	log, err := daemon.OpenLog(cfg, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hutchd:", err)
		return 2
	}
	defer log.Close()
	if os.Geteuid() != 0 {
		log.Warn("hutchd is not running as root: runc, mounts and network namespaces will fail")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go log.Run(ctx)
	if err := daemon.Run(ctx, cfg, log.Logger); err != nil {
		log.Error("hutchd failed", "err", err)
		return 1
	}
	return 0
}
