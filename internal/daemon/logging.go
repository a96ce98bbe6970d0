package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/hutchdev/hutch/internal/config"
	"github.com/hutchdev/hutch/internal/logbound"
)

// Log is hutchd's logger: slog's text format on standard error or, with cfg.LogFile, in a file
// rotated at cfg.LogMaxBytes keeping cfg.LogFiles old ones; every line goes through a
// logbound.Handler (values cut at cfg.LogValueMaxBytes, lines about one sandbox limited to
// cfg.LogSandboxRate per second and level), since sandbox code chooses much of what hutchd logs.
type Log struct {
	*slog.Logger
	bound *logbound.Handler
	file  *logbound.RotatingFile // nil on standard error
}

// OpenLog builds hutchd's logger from cfg; stderr is where it logs without cfg.LogFile.
func OpenLog(cfg config.Config, stderr io.Writer) (*Log, error) {
	l := &Log{}
	w := stderr
	if cfg.LogFile != "" {
		f, err := logbound.OpenRotatingFile(cfg.LogFile, int64(cfg.LogMaxBytes), cfg.LogFiles)
		if err != nil {
			return nil, fmt.Errorf("log file: %w", err)
		}
		l.file, w = f, f
	}
	l.bound = logbound.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: cfg.SlogLevel()}), logbound.Options{
		MaxValue: cfg.LogValueMaxBytes,
		Rate:     float64(cfg.LogSandboxRate),
		Burst:    10 * max(cfg.LogSandboxRate, 1),
	})
	l.Logger = slog.New(l.bound)
	return l, nil
}

// Run reports suppressed lines once a minute until ctx ends.
func (l *Log) Run(ctx context.Context) { l.bound.Run(ctx) }

// Close reports the suppressed lines not reported yet and closes the log file.
func (l *Log) Close() error {
	l.bound.Flush(context.Background()) //nolint:forbidigo // Close has no ctx
	if l.file == nil {
		return nil
	}
	return l.file.Close()
}
