package agentapi

import (
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// File watches (POST /api/watch, /api/watch/check). A watch stream's frames carry an
// "event: <type>" line and the type again in their JSON.

// WatchRequest is the body of watch.
type WatchRequest struct {
	Path      string   `json:"path"`
	Recursive *bool    `json:"recursive"` // default true
	Include   []string `json:"include"`
	Exclude   []string `json:"exclude"` // absent or null: the agent's default excludes
}

// WatchingEvent is the first frame of a watch, once every watch is in place.
type WatchingEvent struct {
	Type        string    `json:"type"` // "watching"
	WatchID     string    `json:"watchId"`
	Path        string    `json:"path"`
	Recursive   bool      `json:"recursive"`
	Directories int       `json:"directories"` // directories watched
	Timestamp   time.Time `json:"timestamp"`
}

// WatchChangeEvent is an "event" frame: a change of Path.
type WatchChangeEvent struct {
	Type        string    `json:"type"`      // "event"
	EventType   string    `json:"eventType"` // create, modify, delete, move_from, move_to, attrib
	Path        string    `json:"path"`
	IsDirectory bool      `json:"isDirectory"`
	Timestamp   time.Time `json:"timestamp"`
}

// WatchOverflowEvent says events were dropped (Dropped -1: the kernel's queue overflowed and
// the number is unknown).
type WatchOverflowEvent struct {
	Type      string    `json:"type"` // "overflow"
	Dropped   int       `json:"dropped"`
	Timestamp time.Time `json:"timestamp"`
}

// WatchErrorEvent is an "error" frame; the watch goes on unless a "stopped" frame follows.
type WatchErrorEvent struct {
	Type      string         `json:"type"` // "error"
	Code      errdefs.Code   `json:"code"`
	Message   string         `json:"message"`
	Context   map[string]any `json:"context,omitempty"`
	Timestamp time.Time      `json:"timestamp"`
}

// WatchStoppedEvent is the last frame of a watch.
type WatchStoppedEvent struct {
	Type      string    `json:"type"` // "stopped"
	Reason    string    `json:"reason"`
	Timestamp time.Time `json:"timestamp"`
}

// WatchCheckRequest is the body of watch/check: Since is the version of an earlier check.
type WatchCheckRequest struct {
	Path  string `json:"path"`
	Since string `json:"since"`
}

// WatchCheckReply is the reply of watch/check: Status "changed", "unchanged" or "resync".
type WatchCheckReply struct {
	Success   bool      `json:"success"`
	Status    string    `json:"status"`
	Version   string    `json:"version"`
	Timestamp time.Time `json:"timestamp"`
}
