package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"sync"
	"time"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
)

// Watch stream item kinds (WatchEvent.Kind).
const (
	WatchKindEvent    = "event"
	WatchKindOverflow = "overflow"
	WatchKindError    = "error"
	WatchKindStopped  = "stopped"
)

// File event types (WatchEvent.EventType).
const (
	WatchCreate   = "create"
	WatchModify   = "modify"
	WatchDelete   = "delete"
	WatchMoveFrom = "move_from"
	WatchMoveTo   = "move_to"
	WatchAttrib   = "attrib"
)

// DefaultWatchExcludes are the exclude globs hutch uses when WatchOptions.Exclude is nil.
var DefaultWatchExcludes = []string{".git", "node_modules"}

// WatchOptions are the optional parameters of Watch. The zero value watches recursively,
// reports everything and excludes DefaultWatchExcludes.
//
// Globs use path.Match syntax and match a path when they match it relative to the watched
// directory ("src/*.ts") or match any one of its segments ("*.ts", "node_modules"). At most
// 64 globs of at most 256 bytes per list.
type WatchOptions struct {
	// NoRecursive watches only the directory itself, not the directories below it.
	NoRecursive bool
	// Include, when not empty, reports only paths matching one of these globs.
	Include []string
	// Exclude leaves out paths matching one of these globs; excluded directories are not
	// watched at all. nil means DefaultWatchExcludes; a non-nil empty slice excludes nothing.
	Exclude []string
}

// WatchEvent is one item of a watch stream. Which fields are set depends on Kind:
//   - "event": EventType (create, modify, delete, move_from, move_to, attrib), Path
//     (absolute, below the watched path as it was given), IsDirectory and Timestamp (of the
//     first change coalesced into it: several changes of one path within about 50 ms are
//     reported once; a modify right after a create is part of the create);
//   - "overflow": Dropped, the number of events lost because the consumer fell behind (the
//     agent keeps 4096), or -1 when the kernel's queue overflowed and the number is unknown.
//     Events were lost either way: rescan what matters;
//   - "error": Err, an *errdefs.Error (e.g. WATCH_LIMIT_EXCEEDED when a new directory could
//     not be watched); the stream goes on;
//   - "stopped" (last): Reason, e.g. "the watched directory was deleted".
type WatchEvent struct {
	Kind        string
	EventType   string
	Path        string
	IsDirectory bool
	Timestamp   time.Time
	Dropped     int
	Err         error
	Reason      string
}

type watchWire = v1.WatchEvent

// Watcher is an open watch stream, from Sandbox.Watch. While it is open the sandbox is held
// awake. Close it when done.
type Watcher struct {
	id, path string
	body     io.ReadCloser
	r        *sse.Reader
	cancel   context.CancelFunc
	ctxErr   func() error // Err of Watch's context
	once     sync.Once
	used     bool
}

// ID returns the watch ID the agent gave the stream.
func (w *Watcher) ID() string { return w.id }

// Path returns the watched path, as the agent reports it (cleaned).
func (w *Watcher) Path() string { return w.path }

// Close ends the watch. It is safe to call more than once and concurrently with Events.
func (w *Watcher) Close() error {
	w.once.Do(func() {
		w.cancel()
		w.body.Close()
	})
	return nil
}

// Events iterates over the stream's events until the "stopped" event (yielded, then the
// iteration ends with no error) or a failure: a zero WatchEvent with an error of code
// STREAM_INCOMPLETE (ErrUnavailable; the cause in its chain) when the stream is cut before
// "stopped", or the context's error when Watch's ctx was cancelled or Close was called.
// Breaking out of the loop leaves the watch open (call Close). Events can be ranged over once.
func (w *Watcher) Events() iter.Seq2[WatchEvent, error] {
	return func(yield func(WatchEvent, error) bool) {
		if w.used {
			yield(WatchEvent{}, errdefs.New(errdefs.CodeInvalidArgument, "watch events can be ranged over once"))
			return
		}
		w.used = true
		for {
			frame, err := w.r.Next()
			if err != nil {
				if ctxErr := w.ctxErr(); ctxErr != nil {
					yield(WatchEvent{}, fmt.Errorf("watch %s: %w", w.path, ctxErr))
					return
				}
				yield(WatchEvent{}, fmt.Errorf("watch %s: %w", w.path, streamIncomplete(context.Background(), err))) //nolint:forbidigo // the iterator has no ctx; the stream is over, nothing is waited on
				return
			}
			var wire watchWire
			if err := json.Unmarshal(frame, &wire); err != nil {
				yield(WatchEvent{}, errdefs.Wrap(errdefs.CodeInternal, err, "decode watch event"))
				return
			}
			ev := WatchEvent{Kind: wire.Type, EventType: wire.EventType, Path: wire.Path, IsDirectory: wire.IsDirectory,
				Timestamp: wire.Timestamp, Dropped: wire.Dropped, Reason: wire.Reason}
			switch wire.Type {
			case WatchKindEvent, WatchKindOverflow, WatchKindStopped:
			case WatchKindError:
				ev.Err = errdefs.Envelope{Code: wire.Code, Message: wire.Message, Context: wire.Context}.Err()
			default:
				continue // a kind this SDK does not know
			}
			if !yield(ev, nil) || ev.Kind == WatchKindStopped {
				return
			}
		}
	}
}

// Watch watches the directory path in the sandbox (POST /v1/sandboxes/{id}/watch) and returns
// once every watch is in place: changes made after Watch returns are reported. Recursive
// watches also cover directories created later (what a new directory already holds is
// reported as create events). The stream lasts until ctx ends, Close is called, or the
// directory is deleted or moved away ("stopped").
//
// path must be absolute, an existing directory, and resolve (symlinks followed) to
// /workspace, /home, /tmp, /var/tmp, /app or below (or the sandbox's workdir). Errors:
// INVALID_PATH (ErrInvalidArgument: relative, empty, outside those directories),
// FILE_NOT_FOUND (ErrNotFound), NOT_DIRECTORY, INVALID_PATTERN or VALIDATION_FAILED (bad
// globs), WATCH_LIMIT_EXCEEDED (ErrResourceExhausted: at most 16 watches at once per
// sandbox, 8192 directories per watch, or the kernel's inotify limits; context {limit,
// max?}), SANDBOX_NOT_FOUND.
func (s *Sandbox) Watch(ctx context.Context, path string, opts WatchOptions) (*Watcher, error) {
	if err := checkID(s.sandboxID); err != nil {
		return nil, fmt.Errorf("watch %s: %w", path, err)
	}
	recursive := !opts.NoRecursive
	body := v1.WatchRequest{Path: path, Recursive: &recursive, Include: opts.Include}
	if opts.Exclude != nil {
		body.Exclude = &opts.Exclude
	}
	ctx, cancel := context.WithCancel(ctx)
	resp, err := s.c.send(ctx, request{method: http.MethodPost, path: sandboxPath(s.sandboxID, "/watch"), json: body, accept: "text/event-stream"})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch %s in %s: %w", path, s.where(), err)
	}
	w := &Watcher{body: resp.Body, r: sse.NewReader(resp.Body), cancel: cancel, ctxErr: ctx.Err}
	frame, err := w.r.Next()
	if err == nil {
		var wire watchWire
		if err = json.Unmarshal(frame, &wire); err == nil && wire.Type != "watching" {
			err = errdefs.Newf(errdefs.CodeInternal, "watch stream began with %q, not watching", wire.Type)
		}
		w.id, w.path = wire.WatchID, wire.Path
	}
	if err != nil {
		w.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		var ee *errdefs.Error
		if !errors.As(err, &ee) {
			err = streamIncomplete(ctx, err)
		}
		return nil, fmt.Errorf("watch %s in %s: %w", path, s.where(), err)
	}
	return w, nil
}

// Change statuses of CheckChanges.
const (
	ChangesChanged   = v1.ChangesChanged
	ChangesUnchanged = v1.ChangesUnchanged
	ChangesResync    = v1.ChangesResync
)

// ChangeStatus is the answer of CheckChanges.
type ChangeStatus = v1.ChangeStatus

// CheckChanges reports whether anything below the directory path changed since the version
// since, from an earlier CheckChanges of the same path (POST /v1/sandboxes/{id}/watch/check).
// The first call for a path (since "") starts tracking it and answers "resync" with a
// version; read the state you care about after it, keep the version, and pass it later. The
// sandbox's agent tracks at most 8 paths (the least recently checked one is dropped, and its
// versions then answer "resync"); a restart of the sandbox forgets everything ("resync").
// Excluded from tracking: .git and node_modules. A deleted tracked directory answers
// "changed" once, then FILE_NOT_FOUND.
//
// Errors: as Watch (INVALID_PATH, FILE_NOT_FOUND, NOT_DIRECTORY, WATCH_LIMIT_EXCEEDED,
// SANDBOX_NOT_FOUND).
func (s *Sandbox) CheckChanges(ctx context.Context, path, since string) (ChangeStatus, error) {
	body := v1.CheckChangesRequest{Path: path, Since: since}
	var reply ChangeStatus
	if err := s.do(ctx, http.MethodPost, "/watch/check", body, &reply); err != nil {
		return ChangeStatus{}, fmt.Errorf("check changes of %s in %s: %w", path, s.where(), err)
	}
	return reply, nil
}
