package v1

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// SandboxStatus is a sandbox's lifecycle state. starting and stopping are transitions (a wake
// or start; a sleep or stop); sleeping (idle for sleepAfter, or asked) and stopped (asked) keep
// the disk and wake on the next operation; error means the last start or sleep failed
// (Sandbox.LastError says why; the next operation tries again).
type SandboxStatus string

// Sandbox states.
const (
	StatusCreating SandboxStatus = "creating"
	StatusStarting SandboxStatus = "starting"
	StatusRunning  SandboxStatus = "running"
	StatusStopping SandboxStatus = "stopping"
	StatusSleeping SandboxStatus = "sleeping"
	StatusStopped  SandboxStatus = "stopped"
	StatusError    SandboxStatus = "error"
)

// Runtimes: the isolation a sandbox runs on.
const (
	// RuntimeRunc is a container on the host kernel.
	RuntimeRunc = "runc"
	// RuntimeGVisor is gVisor's user-space kernel (runsc, ptrace platform): stronger isolation,
	// slower system calls.
	RuntimeGVisor = "gvisor"
)

// Sleep modes of a sleeping sandbox (Sandbox.SleepMode).
const (
	// SleepModeDisk: its files were kept; its processes were stopped and do not restart on wake.
	SleepModeDisk = "disk"
	// SleepModeMemory: a checkpoint of its processes was kept.
	SleepModeMemory = "memory"
)

// Sandbox is hutchd's record of a sandbox: the reply of createSandbox (201 created, 200 it
// existed), getSandbox, start, stop, sleep, wake, update and restore-snapshot.
//
// Sandbox IDs are 1–63 characters of [a-z0-9-], no hyphen at either end; www, api, admin,
// root, system, hutch, default and localhost are reserved (400 INVALID_SANDBOX_ID,
// RESERVED_SANDBOX_ID). Unknown → 404 SANDBOX_NOT_FOUND.
type Sandbox struct {
	ID     string        `json:"id"`
	Status SandboxStatus `json:"status"`
	// Image is the base image's name, e.g. "default"; ImageID its content-addressed ID.
	Image   string `json:"image"`
	ImageID string `json:"imageId,omitempty"`
	// InstanceType is lite (1/16 vCPU, 256 MiB), basic (1/4, 1 GiB), standard-1 (1/2, 4 GiB,
	// the default), standard-2 (1, 6 GiB), standard-3 (2, 8 GiB) or standard-4 (4, 12 GiB).
	InstanceType string `json:"instanceType"`
	// EnvVars is the environment of every command in the sandbox.
	EnvVars   map[string]string `json:"envVars"`
	CreatedAt time.Time         `json:"createdAt"`
	// StartedAt is when it last started; absent (zero) if it never ran.
	StartedAt time.Time `json:"startedAt,omitzero"`
	// Address is the sandbox's IP address on its host link while it runs.
	Address string `json:"address,omitempty"`
	// LastError is why the last start failed (status error).
	LastError string `json:"lastError,omitempty"`
	// LastActivityAt is the last activity on the running sandbox (API operation, preview
	// request, end of a held stream); absent when it is not running.
	LastActivityAt time.Time `json:"lastActivityAt,omitzero"`
	// SleepAfter is the idle time before it sleeps, as a Go duration ("10m", "30s").
	SleepAfter string `json:"sleepAfter"`
	// KeepAlive: the sandbox never sleeps when idle.
	KeepAlive bool `json:"keepAlive"`
	// Snapshot is the snapshot its disk was created or restored from; Layers its snapshot
	// layers, newest first.
	Snapshot string   `json:"snapshot,omitempty"`
	Layers   []string `json:"layers,omitempty"`
	// SnapshotOnSleep: every sleep (idle or asked) snapshots the sandbox. LastSnapshot is the
	// ID of the last such snapshot (usable as CreateSandboxRequest.Snapshot, also on another
	// host sharing the blob store); LastSnapshotError why the last one failed ("" once one
	// succeeds; a failed snapshot does not keep the sandbox from sleeping).
	SnapshotOnSleep   bool   `json:"snapshotOnSleep"`
	LastSnapshot      string `json:"lastSnapshot,omitempty"`
	LastSnapshotError string `json:"lastSnapshotError,omitempty"`
	// Runtime is RuntimeRunc or RuntimeGVisor.
	Runtime string `json:"runtime"`
	// SleepMode (SleepModeDisk or SleepModeMemory) is set on a sleeping sandbox; SleepNote
	// says why a sleep kept only the disk.
	SleepMode string `json:"sleepMode,omitempty"`
	SleepNote string `json:"sleepNote,omitempty"`
}

// SandboxList is the reply of GET /v1/sandboxes.
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// DestroySandboxResult is the reply of DELETE /v1/sandboxes/{id}: {success, id}. Everything
// of the sandbox is removed (disk, processes, ports, sleep snapshots, egress policy).
type DestroySandboxResult struct {
	Success bool   `json:"success"`
	ID      string `json:"id"`
}

// CreateSandboxRequest is the body of POST /v1/sandboxes, a get-or-create: the options apply
// only when the call creates the sandbox (as in the reference system, getSandbox(id,
// options)); concurrent calls for one new ID create exactly one sandbox, running on return.
//
// Errors: 400 INVALID_SANDBOX_ID, RESERVED_SANDBOX_ID, INVALID_INSTANCE_TYPE, INVALID_RUNTIME,
// VALIDATION_FAILED (sleepAfter, env sizes), EGRESS_POLICY_INVALID; 404 IMAGE_NOT_FOUND,
// SNAPSHOT_NOT_FOUND; 503 RUNTIME_NOT_AVAILABLE, SANDBOX_START_FAILED.
type CreateSandboxRequest struct {
	ID string `json:"id"`
	// Image is the base image name; empty means "default". Must be empty with Snapshot.
	Image        string            `json:"image,omitempty"`
	InstanceType string            `json:"instanceType,omitempty"`
	EnvVars      map[string]string `json:"envVars,omitempty"`
	// SleepAfter is the idle time before it sleeps (default 10m).
	SleepAfter *SleepAfter `json:"sleepAfter,omitempty"`
	KeepAlive  bool        `json:"keepAlive,omitempty"`
	// SnapshotOnSleep: snapshot the sandbox every time it sleeps (Sandbox.LastSnapshot).
	SnapshotOnSleep bool `json:"snapshotOnSleep,omitempty"`
	// Snapshot ("sha256-…") creates the sandbox from a snapshot: its layers below a fresh
	// disk, its image, and its configuration for the options left out.
	Snapshot string `json:"snapshot,omitempty"`
	// Egress is the sandbox's egress policy, in force before its first process runs; nil
	// means allow-all, or for a sandbox made from a snapshot its origin's policy.
	Egress *EgressPolicy `json:"egress,omitempty"`
	// Runtime is RuntimeRunc or RuntimeGVisor; empty means hutchd's --runtime.
	Runtime string `json:"runtime,omitempty"`
}

// UpdateSandboxRequest is the body of PATCH /v1/sandboxes/{id}; absent fields stay as they
// are. It does not wake a sleeping sandbox; on a running one the idle timer starts again.
type UpdateSandboxRequest struct {
	SleepAfter      *SleepAfter `json:"sleepAfter,omitempty"`
	KeepAlive       *bool       `json:"keepAlive,omitempty"`
	SnapshotOnSleep *bool       `json:"snapshotOnSleep,omitempty"`
}

// SleepAfter is a sleepAfter in a request: a Go duration string ("10m", "30s", "1h30m") or
// a JSON number of seconds (90, 1.5), kept here as the text it was sent as; hutchd checks its
// value (1 s to 8760 h, whole milliseconds; 0 and "never" are refused with
// VALIDATION_FAILED: use keepAlive). A value of another JSON type fails the decoding with
// VALIDATION_FAILED. It is sent as a JSON string.
type SleepAfter string

// UnmarshalJSON takes a JSON string or number; a number is kept as its literal text (which
// may be beyond a float64, e.g. 1e400: hutchd refuses it by its value).
func (v *SleepAfter) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*v = SleepAfter(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return errdefs.New(errdefs.CodeInvalidArgument, `sleepAfter: want a duration string such as "10m" or a number of seconds`)
	}
	*v = SleepAfter(n.String())
	return nil
}

// PingResult is the reply of GET /v1/sandboxes/{id}/ping (forwarded to the agent, starting a
// stopped sandbox): the agent's version.
type PingResult struct {
	Reply
	Version string `json:"version"`
}
