package blob

import (
	"context"
	"log/slog"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// Store kinds for Config.Kind.
const (
	KindLocal = "local"
	KindS3    = "s3"
)

// DefaultStaleTempAge is LocalConfig.StaleTempAge's default.
const DefaultStaleTempAge = time.Hour

// Config selects and configures a store.
type Config struct {
	// Kind is KindLocal (the default when empty) or KindS3.
	Kind  string      `json:"kind"`
	Local LocalConfig `json:"local"`
	S3    S3Config    `json:"s3"`
}

// LocalConfig configures a local store.
type LocalConfig struct {
	// Dir is the store's root directory, created 0700 if missing. Required.
	Dir string `json:"dir"`
	// StaleTempAge: at Open, temp files of uploads not written to for longer than this (a
	// crashed Put) are removed. Default 1 h; negative disables.
	StaleTempAge time.Duration `json:"staleTempAge"`
}

// Open returns the store cfg describes (a *Local or an *S3) after cleaning up what crashed
// uploads left: stale local temp files, or stale incomplete S3 multipart uploads. A failed
// cleanup is logged, not returned. log may be nil. Errors: VALIDATION_FAILED (bad config), and
// those of NewLocal and NewS3.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch cfg.Kind {
	case KindLocal, "":
		l, err := NewLocal(cfg.Local.Dir, log)
		if err != nil {
			return nil, err
		}
		age := cfg.Local.StaleTempAge
		if age == 0 {
			age = DefaultStaleTempAge
		}
		if age > 0 {
			if _, err := l.RemoveStaleTemp(ctx, age); err != nil {
				log.Warn("blob: removing stale temp files failed", "store", l.Describe(), "err", err)
			}
		}
		return l, nil
	case KindS3:
		s, err := NewS3(ctx, cfg.S3, log)
		if err != nil {
			return nil, err
		}
		age := cfg.S3.StaleUploadAge
		if age == 0 {
			age = DefaultStaleUploadAge
		}
		if age > 0 {
			if _, err := s.AbortStaleUploads(ctx, age); err != nil {
				log.Warn("blob: aborting stale S3 uploads failed", "store", s.Describe(), "err", err)
			}
		}
		return s, nil
	default:
		return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "blob: unknown store kind %q (want %q or %q)", cfg.Kind, KindLocal, KindS3)
	}
}
