package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/watch"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// watchHeartbeat is how often an idle watch stream gets an SSE comment line, so that a caller
// that went away is noticed (the write fails) and proxies do not time the stream out.
var watchHeartbeat = 15 * time.Second

// watchStream writes the frames of a watch stream: "event: <type>" then "data: <json>", the
// JSON also carrying "type" (so internal/sse readers, which ignore event lines, dispatch on
// it). Safe for concurrent use (the heartbeat writes from its own goroutine).
type watchStream struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
}

// send writes frame v (one of the agentapi.Watch*Event types) as event typ.
func (s *watchStream) send(typ string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("watch: marshal: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", typ, b); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *watchStream) heartbeat() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := fmt.Fprint(s.w, ": keepalive\n\n"); err != nil {
		return err
	}
	return s.rc.Flush()
}

// handleWatch: POST /api/watch {path, recursive?, include?, exclude?} → SSE: "watching"
// {watchId, path} once every watch is in place, then "event" {eventType, path, isDirectory,
// timestamp}, "overflow" {dropped}, "error" {code, message, context?}, and "stopped" {reason}
// last (package watch). The watch ends when the caller goes away. Errors before the stream:
// INVALID_PATH, FILE_NOT_FOUND, NOT_DIRECTORY, INVALID_PATTERN, VALIDATION_FAILED,
// WATCH_LIMIT_EXCEEDED.
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.WatchRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	opts := watch.Options{Recursive: req.Recursive == nil || *req.Recursive, Include: req.Include, Exclude: req.Exclude}
	wt, err := s.watches.Watch(req.Path, opts)
	if err != nil {
		return err
	}
	defer wt.Close()
	sse.NewWriter(w) // headers and status; the frames below carry event lines
	out := &watchStream{w: w, rc: http.NewResponseController(w)}
	if err := out.send("watching", agentapi.WatchingEvent{Type: "watching", WatchID: wt.ID(), Path: wt.Path(),
		Recursive: opts.Recursive, Directories: wt.Dirs(), Timestamp: now()}); err != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		t := time.NewTicker(watchHeartbeat)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if out.heartbeat() != nil {
					cancel()
					return
				}
			}
		}
	}()
	for {
		ev, err := wt.Next(ctx)
		if err != nil {
			return nil // stopped was sent (io.EOF), or the caller went away
		}
		if err := out.send(watchFrame(ev)); err != nil {
			return nil
		}
	}
}

// watchFrame is the type and data of the frame for ev.
func watchFrame(ev watch.Event) (string, any) {
	switch ev.Kind {
	case watch.KindEvent:
		return "event", agentapi.WatchChangeEvent{Type: "event", EventType: string(ev.Type), Path: ev.Path, IsDirectory: ev.IsDir, Timestamp: ev.Time}
	case watch.KindOverflow:
		return "overflow", agentapi.WatchOverflowEvent{Type: "overflow", Dropped: ev.Dropped, Timestamp: ev.Time}
	case watch.KindError:
		f := agentapi.WatchErrorEvent{Type: "error", Code: errdefs.CodeOf(ev.Err), Message: ev.Err.Error(), Timestamp: ev.Time}
		var e *errdefs.Error
		if errors.As(ev.Err, &e) {
			f.Context = e.Context // omitted when empty
		}
		return "error", f
	default:
		return "stopped", agentapi.WatchStoppedEvent{Type: "stopped", Reason: ev.Reason, Timestamp: ev.Time}
	}
}

// handleWatchCheck: POST /api/watch/check {path, since?} → {success, status:
// "changed"|"unchanged"|"resync", version, timestamp} (watch.Manager.Check). Errors:
// INVALID_PATH, FILE_NOT_FOUND, NOT_DIRECTORY, WATCH_LIMIT_EXCEEDED.
func (s *Server) handleWatchCheck(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.WatchCheckRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	c, err := s.watches.Check(req.Path, req.Since)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.WatchCheckReply{Success: true, Status: c.Status, Version: c.Version, Timestamp: now()})
	return nil
}
