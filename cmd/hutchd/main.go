// Command hutchd is the Hutch daemon: it runs sandboxes for AI agents on this host (runc,
// overlayfs, a network namespace and egress proxy per sandbox) and serves the /v1 API. See
// README.md and api/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
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
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.SlogLevel()}))
	if os.Geteuid() != 0 {
		log.Warn("hutchd is not running as root: runc, mounts and network namespaces will fail")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := daemon.Run(ctx, cfg, log); err != nil {
		log.Error("hutchd failed", "err", err)
		os.Exit(1)
	}
}
