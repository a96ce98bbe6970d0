package client

import (
	"context"
	"fmt"
	"net/http"
	"time"

	v1 "github.com/hutchdev/hutch/api/v1"
)

// SandboxStatus is the lifecycle state of a sandbox (v1.SandboxStatus).
type SandboxStatus = v1.SandboxStatus

// Sandbox states. starting and stopping are transitions (waking or starting; going to sleep or
// stopping); sleeping is a sandbox put to sleep when idle or by Sleep, which any operation
// wakes; stopped is an explicit Stop.
const (
	StatusCreating = v1.StatusCreating
	StatusStarting = v1.StatusStarting
	StatusRunning  = v1.StatusRunning
	StatusStopping = v1.StatusStopping
	StatusSleeping = v1.StatusSleeping
	StatusStopped  = v1.StatusStopped
	StatusError    = v1.StatusError
)

// SandboxInfo is hutchd's record of a sandbox (v1.Sandbox). StartedAt and LastActivityAt are
// the zero time when absent.
type SandboxInfo = v1.Sandbox

// SandboxOptions are the creation options of Client.Sandbox. They apply only when the call
// creates the sandbox; for an existing sandbox they are ignored.
type SandboxOptions struct {
	// Image is the base image name; empty means "default".
	Image string
	// InstanceType sizes the sandbox: lite (1/16 vCPU, 256 MiB), basic (1/4, 1 GiB),
	// standard-1 (1/2, 4 GiB, the default when empty), standard-2 (1, 6 GiB),
	// standard-3 (2, 8 GiB), standard-4 (4, 12 GiB).
	InstanceType string
	// EnvVars is the environment of every command in the sandbox.
	EnvVars map[string]string
	// SleepAfter is how long the sandbox may be idle before it sleeps (whole milliseconds, at
	// least 1 s); 0 means the server's default, 10 minutes, unless SleepAfterSet. Change it
	// later with Update.
	SleepAfter time.Duration
	// SleepAfterSet sends SleepAfter even when it is 0, which the server refuses with
	// VALIDATION_FAILED: for callers that pass a user's explicit value through (the CLI's
	// --sleep-after 0).
	SleepAfterSet bool
	// KeepAlive: the sandbox never sleeps when idle.
	KeepAlive bool
	// SnapshotOnSleep: every sleep snapshots the sandbox (SandboxInfo.LastSnapshot).
	SnapshotOnSleep bool
	// Snapshot ("sha256-…", from Sandbox.Snapshot) creates the sandbox from a snapshot: its
	// disk is the snapshot's, its image the snapshot's (Image must be empty), and the options
	// left empty here take the snapshot's configuration.
	Snapshot string
	// Egress is the sandbox's egress policy (client/egress.go), in force before its first
	// process runs; nil means allow-all. Forks and sandboxes started from a snapshot inherit
	// their origin's policy when this is nil.
	Egress *EgressPolicy
	// Runtime is the isolation runtime: "runc" (containers sharing the host kernel) or
	// "gvisor" (gVisor's user-space kernel: stronger isolation, slower system calls); empty
	// means hutchd's default (its --runtime). Errors: INVALID_RUNTIME (ErrInvalidArgument) for
	// another name, RUNTIME_NOT_AVAILABLE (ErrFailedPrecondition) when hutchd cannot run it.
	Runtime string
}

// Sandbox is a handle on one sandbox of a Client. It holds no state besides its ID: every
// method is one call to hutchd, and a sandbox that is stopped is started by the operations
// that run inside it (Exec, file and session operations, GitCheckout).
type Sandbox struct {
	scope
	created bool
}

// ID returns the sandbox ID.
func (s *Sandbox) ID() string { return s.sandboxID }

// Created reports whether the Client.Sandbox call that returned s created the sandbox (false
// when it already existed, and for handles from Client.SandboxHandle).
func (s *Sandbox) Created() bool { return s.created }

// Sandbox gets or creates the sandbox id (POST /v1/sandboxes) and returns a handle on it. The
// sandbox is running when Sandbox returns. opts may be nil and applies only at creation.
// Concurrent calls for one new id create exactly one sandbox.
//
// Errors: INVALID_SANDBOX_ID or RESERVED_SANDBOX_ID (ErrInvalidArgument) for a bad id,
// INVALID_INSTANCE_TYPE, VALIDATION_FAILED (a SleepAfter under 1 s), IMAGE_NOT_FOUND
// (ErrNotFound), SANDBOX_START_FAILED (ErrUnavailable).
func (c *Client) Sandbox(ctx context.Context, id string, opts *SandboxOptions) (*Sandbox, error) {
	if err := checkID(id); err != nil {
		return nil, fmt.Errorf("get sandbox: %w", err)
	}
	req := v1.CreateSandboxRequest{ID: id}
	if opts != nil {
		req.Image, req.InstanceType, req.EnvVars = opts.Image, opts.InstanceType, opts.EnvVars
		if opts.SleepAfter != 0 || opts.SleepAfterSet {
			sa := v1.SleepAfter(opts.SleepAfter.String())
			req.SleepAfter = &sa
		}
		req.KeepAlive = opts.KeepAlive
		req.Snapshot = opts.Snapshot
		req.SnapshotOnSleep = opts.SnapshotOnSleep
		req.Egress = opts.Egress
		req.Runtime = opts.Runtime
	}
	resp, err := c.send(ctx, request{method: http.MethodPost, path: "/v1/sandboxes", json: req})
	if err != nil {
		return nil, fmt.Errorf("get sandbox %q: %w", id, err)
	}
	defer resp.Body.Close()
	s := c.SandboxHandle(id)
	s.created = resp.StatusCode == http.StatusCreated
	return s, nil
}

// SandboxHandle returns a handle on the sandbox id without any call. Operations on it fail
// with SANDBOX_NOT_FOUND (ErrNotFound) if the sandbox does not exist.
func (c *Client) SandboxHandle(id string) *Sandbox {
	return &Sandbox{scope: scope{c: c, sandboxID: id}}
}

// GetSandbox returns the record of sandbox id (GET /v1/sandboxes/{id}); it does not start it.
// Unknown id → SANDBOX_NOT_FOUND (ErrNotFound).
func (c *Client) GetSandbox(ctx context.Context, id string) (*SandboxInfo, error) {
	if err := checkID(id); err != nil {
		return nil, fmt.Errorf("get sandbox: %w", err)
	}
	var info SandboxInfo
	if err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "")}, &info); err != nil {
		return nil, fmt.Errorf("get sandbox %q: %w", id, err)
	}
	return &info, nil
}

// ListSandboxes returns every sandbox of hutchd (GET /v1/sandboxes), in the server's order.
func (c *Client) ListSandboxes(ctx context.Context) ([]SandboxInfo, error) {
	var reply v1.SandboxList
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/sandboxes"}, &reply); err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	return reply.Sandboxes, nil
}

// Info returns the sandbox's record (GET /v1/sandboxes/{id}); it does not start it.
func (s *Sandbox) Info(ctx context.Context) (*SandboxInfo, error) {
	return s.c.GetSandbox(ctx, s.sandboxID)
}

// Destroy removes the sandbox and everything of it: processes, disk, sessions
// (DELETE /v1/sandboxes/{id}). Unknown sandbox → SANDBOX_NOT_FOUND (ErrNotFound).
func (s *Sandbox) Destroy(ctx context.Context) error {
	if err := checkID(s.sandboxID); err != nil {
		return fmt.Errorf("destroy sandbox: %w", err)
	}
	err := s.c.call(ctx, request{method: http.MethodDelete, path: sandboxPath(s.sandboxID, "")}, nil)
	if err != nil {
		return fmt.Errorf("destroy sandbox %q: %w", s.sandboxID, err)
	}
	return nil
}

// Start starts a stopped sandbox and returns its record (POST /v1/sandboxes/{id}/start).
// Starting a running sandbox is a no-op.
func (s *Sandbox) Start(ctx context.Context) (*SandboxInfo, error) {
	return s.lifecycle(ctx, "start")
}

// Stop stops the sandbox, keeping its disk, and returns its record
// (POST /v1/sandboxes/{id}/stop). Stopping a stopped sandbox is a no-op.
func (s *Sandbox) Stop(ctx context.Context) (*SandboxInfo, error) {
	return s.lifecycle(ctx, "stop")
}

func (s *Sandbox) lifecycle(ctx context.Context, verb string) (*SandboxInfo, error) {
	if err := checkID(s.sandboxID); err != nil {
		return nil, fmt.Errorf("%s sandbox: %w", verb, err)
	}
	var info SandboxInfo
	err := s.c.call(ctx, request{method: http.MethodPost, path: sandboxPath(s.sandboxID, "/"+verb)}, &info)
	if err != nil {
		return nil, fmt.Errorf("%s sandbox %q: %w", verb, s.sandboxID, err)
	}
	return &info, nil
}

// HealthInfo is the reply of GET /v1/health.
type HealthInfo = v1.Health

// Health checks that hutchd is up (GET /v1/health, no token needed).
func (c *Client) Health(ctx context.Context) (*HealthInfo, error) {
	var h HealthInfo
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/health"}, &h); err != nil {
		return nil, fmt.Errorf("health: %w", err)
	}
	return &h, nil
}

// Ping checks that the sandbox's agent answers (GET /v1/sandboxes/{id}/ping), starting the
// sandbox if it is stopped. It returns the agent's version.
func (s *Sandbox) Ping(ctx context.Context) (string, error) {
	var reply v1.PingResult
	if err := s.do(ctx, http.MethodGet, "/ping", nil, &reply); err != nil {
		return "", fmt.Errorf("ping sandbox %q: %w", s.sandboxID, err)
	}
	return reply.Version, nil
}
