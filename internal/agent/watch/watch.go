// Package watch implements the agent's file watching (api/agent.md "Watch"): recursive inotify
// watches through fsnotify with include/exclude globs, events coalesced in a short window, a
// bounded queue that reports overflow instead of dropping silently, and a change journal that
// answers "has anything below this path changed since version V".
//
// A Watcher watches one directory (and, when recursive, every directory below it, including
// directories created later). Its events come out of Next in order:
//   - KindEvent: create, modify, delete, move_from, move_to or attrib of one path;
//   - KindOverflow: events were lost (the queue was full, or the kernel's inotify queue
//     overflowed); the consumer should rescan;
//   - KindError: a non-fatal problem (a new directory could not be watched); the stream goes on;
//   - KindStopped: the last event (the watched directory was deleted or moved away, the
//     Manager was closed).
//
// Coalescing: raw events are collected for Options.Coalesce (default 50 ms) from the first
// one; then, per path and in order of first appearance, modify and attrib that follow a create
// or modify of the same path are absorbed into it, and repeats of the same type collapse into
// one. A delete is never merged with what came before it, so create then delete of one path
// is reported as both. Moves: fsnotify reports the old name of a rename as Rename (reported as
// move_from) and the new name as Create; a Create that is the very next raw event after a
// move_from is reported as move_to (the kernel queues the two halves of a rename back to
// back). A move whose other half is outside the watched tree is a lone move_from or move_to.
// A directory that appears (created or moved in) is watched, and what it already holds is
// reported as create events (files may be created in it before its watch is in place); one
// that was reported by both the scan and inotify within one window is reported once.
package watch

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/files"
	"github.com/hutchdev/hutch/internal/fserr"
)

// Defaults and bounds.
const (
	// DefaultCoalesce is the coalescing window.
	DefaultCoalesce = 50 * time.Millisecond
	// DefaultQueueSize is how many events a Watcher holds for a slow consumer.
	DefaultQueueSize = 4096
	// DefaultMaxDirs is how many directories one Watcher watches at most.
	DefaultMaxDirs = 8192
	// DefaultMaxWatches is how many Watchers a Manager runs at once.
	DefaultMaxWatches = 16
	// MaxPatterns is the largest number of include or exclude globs, and MaxPatternLen the
	// longest one, in bytes.
	MaxPatterns   = 64
	MaxPatternLen = 256
)

// DefaultExcludes are the exclude globs used when Options.Exclude is nil.
var DefaultExcludes = []string{".git", "node_modules"}

// DefaultRoots are the directories a watch may be on (or below), after symlinks are resolved.
var DefaultRoots = []string{"/workspace", "/home", "/tmp", "/var/tmp", "/app"}

// Kind is the kind of an Event.
type Kind string

// Event kinds.
const (
	KindEvent    Kind = "event"
	KindOverflow Kind = "overflow"
	KindError    Kind = "error"
	KindStopped  Kind = "stopped"
)

// Type is the type of a KindEvent event.
type Type string

// Event types.
const (
	Create   Type = "create"
	Modify   Type = "modify"
	Delete   Type = "delete"
	MoveFrom Type = "move_from"
	MoveTo   Type = "move_to"
	Attrib   Type = "attrib"
)

// Event is one item of a Watcher's stream. Which fields are set depends on Kind:
// KindEvent: Type, Path (absolute, below the path the watch was asked for, symlinks of that
// path kept as written), IsDir, Time (of the first raw event coalesced into it); KindOverflow:
// Dropped (events the queue dropped, or -1 when the kernel's queue overflowed and the number
// is unknown); KindError: Err (an *errdefs.Error); KindStopped: Reason.
type Event struct {
	Kind    Kind
	Type    Type
	Path    string
	IsDir   bool
	Time    time.Time
	Dropped int
	Err     error
	Reason  string
}

// Options configure a watch. The zero value is not recursive; use Defaults for the API's
// defaults.
type Options struct {
	// Recursive watches every directory below the path too, including ones created later.
	Recursive bool
	// Include, when not empty, reports only paths that match one of these globs.
	Include []string
	// Exclude leaves out paths that match one of these globs (excluded directories are not
	// watched at all); nil means DefaultExcludes, an empty non-nil slice nothing.
	//
	// A glob (path.Match syntax) matches a path when it matches the path relative to the
	// watched directory ("src/*.ts") or any one segment of it ("*.ts", "node_modules").
	Exclude []string
	// Coalesce is the coalescing window; 0 means DefaultCoalesce.
	Coalesce time.Duration
	// QueueSize bounds the events held for the consumer; 0 means DefaultQueueSize.
	QueueSize int
	// MaxDirs bounds the directories watched; 0 means DefaultMaxDirs.
	MaxDirs int
}

// Defaults returns the API's default options: recursive, DefaultExcludes.
func Defaults() Options { return Options{Recursive: true} }

// validatePatterns checks a list of globs: at most MaxPatterns of at most MaxPatternLen bytes,
// each valid for path.Match. Errors: VALIDATION_FAILED, INVALID_PATTERN (context {pattern}).
func validatePatterns(field string, pats []string) error {
	if len(pats) > MaxPatterns {
		return errdefs.Newf(errdefs.CodeInvalidArgument, "%s: at most %d patterns, got %d", field, MaxPatterns, len(pats)).
			With("field", field)
	}
	for _, p := range pats {
		if p == "" || len(p) > MaxPatternLen || strings.IndexByte(p, 0) >= 0 {
			return errdefs.Newf(errdefs.CodeInvalidPattern, "%s: pattern must be 1-%d bytes without NUL", field, MaxPatternLen).
				With("field", field).With("pattern", p)
		}
		if _, err := path.Match(p, ""); err != nil {
			return errdefs.Newf(errdefs.CodeInvalidPattern, "%s: bad glob %q: %v", field, p, err).
				With("field", field).With("pattern", p)
		}
	}
	return nil
}

// matchAny reports whether rel (slash-separated, relative to the watched directory) or one of
// its segments matches one of pats.
func matchAny(pats []string, rel string) bool {
	for _, p := range pats {
		if ok, _ := path.Match(p, rel); ok {
			return true
		}
		if !strings.Contains(rel, "/") {
			continue
		}
		for seg := range strings.SplitSeq(rel, "/") {
			if ok, _ := path.Match(p, seg); ok {
				return true
			}
		}
	}
	return false
}

// filter decides which paths are watched and reported.
type filter struct {
	include, exclude []string
}

// excluded reports whether rel is left out (and, for a directory, not watched).
func (f filter) excluded(rel string) bool { return rel != "" && matchAny(f.exclude, rel) }

// reported reports whether an event for rel is sent.
func (f filter) reported(rel string) bool {
	if f.excluded(rel) {
		return false
	}
	return len(f.include) == 0 || matchAny(f.include, rel)
}

// Resolve validates p, the path a watch or a change check is asked for, and returns it
// cleaned and with its symlinks resolved. It must be absolute, exist, be a directory, and
// resolve to one of roots or below it (or below one of roots' own resolutions).
// Errors: INVALID_PATH (empty, relative, NUL byte, too long, outside roots; context {path,
// resolved, allowedRoots}), FILE_NOT_FOUND (404), NOT_DIRECTORY, PERMISSION_DENIED.
func Resolve(p string, roots []string) (clean, resolved string, err error) {
	if err := files.CheckPath(p); err != nil {
		return "", "", err
	}
	if !filepath.IsAbs(p) {
		return "", "", errdefs.Newf(errdefs.CodeInvalidPath, "path %q is not absolute", p).With("path", p)
	}
	clean = filepath.Clean(p)
	resolved, err = filepath.EvalSymlinks(clean)
	if err != nil {
		return "", "", fserr.Map(err, clean)
	}
	if !underRoots(resolved, roots) {
		return "", "", errdefs.Newf(errdefs.CodeInvalidPath, "path %q resolves to %q, which is outside the watchable directories (%s)",
			clean, resolved, strings.Join(roots, ", ")).With("path", clean).With("resolved", resolved).With("allowedRoots", roots)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return "", "", fserr.Map(err, clean)
	}
	if !fi.IsDir() {
		return "", "", errdefs.Newf(errdefs.CodeNotDirectory, "path %q is not a directory", clean).With("path", clean)
	}
	return clean, resolved, nil
}

// underRoots reports whether p is one of roots (or of their resolutions) or below one.
func underRoots(p string, roots []string) bool {
	within := func(root string) bool { return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/") }
	return slices.ContainsFunc(roots, func(root string) bool {
		if root == "" {
			return false
		}
		if within(root) {
			return true
		}
		r, err := filepath.EvalSymlinks(root)
		return err == nil && within(r)
	})
}

// limitError is the WATCH_LIMIT_EXCEEDED error for limit (directories, watches,
// inotify_watches, inotify_instances).
func limitError(limit string, max int, format string, args ...any) *errdefs.Error {
	e := errdefs.Newf(errdefs.CodeWatchLimit, format, args...).With("limit", limit)
	if max > 0 {
		e = e.With("max", max)
	}
	return e
}

// inotifyError classifies an error of inotify_init or inotify_add_watch: the per-user kernel
// limits become WATCH_LIMIT_EXCEEDED, the rest file codes.
func inotifyError(err error, p string) error {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return limitError("inotify_watches", 0, "the kernel's inotify watch limit (fs.inotify.max_user_watches) is exhausted while watching %s", p).With("path", p)
	case errors.Is(err, syscall.EMFILE):
		return limitError("inotify_instances", 0, "the kernel's inotify instance limit (fs.inotify.max_user_instances) is exhausted")
	}
	return fserr.Map(fmt.Errorf("watch %s: %w", p, err), p)
}
