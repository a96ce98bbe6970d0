package v1

import (
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// WatchRequest is the body of POST /v1/sandboxes/{id}/watch: an SSE stream of changes below
// Path (the reference system's watch()). Recursive defaults to true. Include and Exclude are
// globs (path.Match syntax) matched against the path relative to Path or any one of its
// segments; at most 64 of at most 256 bytes per list. An absent Exclude means the default
// excludes (.git, node_modules, …); an empty one excludes nothing. Errors: 404 FILE_NOT_FOUND,
// 400 NOT_DIRECTORY, 429 WATCH_LIMIT_EXCEEDED.
type WatchRequest struct {
	Path      string    `json:"path"`
	Recursive *bool     `json:"recursive,omitempty"`
	Include   []string  `json:"include,omitempty"`
	Exclude   *[]string `json:"exclude,omitempty"`
}

// Watch event types (WatchEvent.Type).
const (
	WatchEventWatching = "watching"
	WatchEventEvent    = "event"
	WatchEventOverflow = "overflow"
	WatchEventError    = "error"
	WatchEventStopped  = "stopped"
)

// WatchEvent is one SSE frame of watch: "watching" (first: WatchID, Path); "event"
// (EventType create, modify, delete, move_from, move_to or attrib; Path absolute;
// IsDirectory; Timestamp of the first change coalesced into it, about 50 ms); "overflow"
// (Dropped events lost because the consumer fell behind, -1 when the kernel's queue
// overflowed); "error" (Code, Message, Context; the stream goes on); "stopped" (last:
// Reason).
type WatchEvent struct {
	Type        string `json:"type"`
	WatchID     string `json:"watchId,omitempty"`
	Path        string `json:"path,omitempty"`
	EventType   string `json:"eventType,omitempty"`
	IsDirectory bool   `json:"isDirectory,omitempty"`
	// Recursive and Directories are set on "watching": whether subdirectories are watched,
	// and how many directories the watch covers.
	Recursive   *bool          `json:"recursive,omitempty"`
	Directories int            `json:"directories,omitempty"`
	Timestamp   time.Time      `json:"timestamp,omitzero"`
	Dropped     int            `json:"dropped,omitempty"`
	Code        errdefs.Code   `json:"code,omitempty"`
	Message     string         `json:"message,omitempty"`
	Context     map[string]any `json:"context,omitempty"`
	Reason      string         `json:"reason,omitempty"`
}

// CheckChangesRequest is the body of POST watch/check: has anything below Path changed since
// the version Since (empty: first call)?
type CheckChangesRequest struct {
	Path  string `json:"path"`
	Since string `json:"since,omitempty"`
}

// Change statuses (ChangeStatus.Status).
const (
	ChangesChanged   = "changed"
	ChangesUnchanged = "unchanged"
	// ChangesResync: the agent cannot tell (it restarted, or Since is unknown): rescan.
	ChangesResync = "resync"
)

// ChangeStatus is the outcome of watch/check: Status and the Version to pass as the next
// Since.
type ChangeStatus struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// ChangeStatusReply is the reply of watch/check.
type ChangeStatusReply struct {
	Reply
	ChangeStatus
}
