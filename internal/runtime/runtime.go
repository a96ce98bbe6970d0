// Package runtime is the contract between hutchd's sandbox manager and an isolation backend
// (runc, and gVisor's runsc).
//
// Vocabulary: a container is one sandbox's running instance. Its ID is the sandbox ID. The
// backend receives a fully resolved Spec: the root filesystem is already mounted (overlayfs, see
// internal/rootfs), the network namespace already exists (internal/netns), and every host path
// in Mounts exists. The backend turns the Spec into its own form (an OCI bundle for runc),
// starts the container detached, and can later report its state, signal it and delete it.
//
// Lifecycle: Start → (State …) → Kill → Delete. Containers outlive hutchd: after a restart the
// manager lists them and either re-adopts or deletes them. Implementations keep no state in
// memory that the manager depends on; everything is recoverable from the backend's own state
// directory.
//
// What a backend cannot do that changes how hutchd runs a sandbox on it is in its Features.
// Optional capabilities (pause, checkpoint/restore, …) are separate interfaces found by type
// assertion.
package runtime

import (
	"context"
	"os"
	"syscall"

	"github.com/hutchdev/hutch/internal/idmap"
)

// Spec describes one container to start.
type Spec struct {
	// ID is the container ID (= sandbox ID): 1–63 of [a-z0-9-].
	ID string
	// RootFS is the absolute host path of the mounted root filesystem (overlayfs merged dir).
	RootFS string
	// Hostname inside the container.
	Hostname string
	// Args is the command of PID 1 inside the container (hutch-init and its flags).
	Args []string
	// Env is PID 1's environment, "KEY=value" strings.
	Env []string
	// Cwd is PID 1's working directory inside the container.
	Cwd string
	// Mounts are extra bind mounts, applied after the defaults (/proc, /dev, /sys, …).
	Mounts []Mount
	// NetNSPath is the path of an existing network namespace to join (e.g.
	// /var/run/netns/hutch-ID). Empty means a fresh, unconnected network namespace.
	NetNSPath string
	// Resources are the cgroup limits.
	Resources Resources
	// LogPath is a host file that receives PID 1's stdout and stderr.
	LogPath string
	// ExtraFiles are inherited by PID 1 as fds 3, 4, … (hutchd hands the agent its listening
	// socket this way). The caller keeps ownership and closes them after Start.
	ExtraFiles []*os.File
	// IDMap, when enabled, runs the container in a user namespace of its own: in-container
	// IDs [0, Size) are host IDs [Base, Base+Size). RootFS must then show files owned by the
	// range (idmapped lower layers, an upper directory owned by Base). Only runc uses it.
	IDMap idmap.Map
}

// Mount is a bind mount from the host into the container.
type Mount struct {
	Source      string // host path
	Destination string // path inside the container
	ReadOnly    bool
}

// Resources are enforced limits, not labels.
type Resources struct {
	// MilliCPU is the CPU quota in thousandths of a CPU (250 = a quarter of one CPU).
	MilliCPU int64
	// MemoryBytes is the memory limit; swap is not allowed beyond it.
	MemoryBytes int64
	// Pids is the maximum number of tasks in the container.
	Pids int64
}

// Status is a container's state as the backend sees it.
type Status string

// Container states.
const (
	StatusCreated Status = "created"
	StatusRunning Status = "running"
	StatusPaused  Status = "paused"
	StatusStopped Status = "stopped"
)

// State is a container's reported state.
type State struct {
	ID     string
	Status Status
	// Pid is the host PID of the container's PID 1, 0 when not running.
	Pid int
}

// Runtime is an isolation backend. Implementations are safe for concurrent use on different
// IDs; the manager serialises calls for one ID.
type Runtime interface {
	// Name is the backend's name ("runc").
	Name() string
	// Features reports what the backend's containers cannot do that hutchd must make up for.
	Features() Features
	// Start creates and starts the container detached, and returns once PID 1 runs. On error
	// nothing of the container is left behind. An existing container with the same ID gives an
	// error of class errdefs.ErrAlreadyExists.
	Start(ctx context.Context, spec Spec) (State, error)
	// State reports the container's state. An unknown ID gives errdefs.ErrNotFound.
	State(ctx context.Context, id string) (State, error)
	// List reports every container the backend knows, running or not.
	List(ctx context.Context) ([]State, error)
	// Kill sends sig to the container's PID 1 (all=false) or to every process in it (all=true).
	Kill(ctx context.Context, id string, sig syscall.Signal, all bool) error
	// Delete removes the container, killing it first if force is set. An unknown ID is not an
	// error. After Delete returns, no process of the container remains and its cgroup is gone.
	Delete(ctx context.Context, id string, force bool) error
}

// Features are a backend's differences that hutchd must make up for (the zero value: none).
type Features struct {
	// RefusesExtraFiles is set for a backend that cannot hand PID 1 inherited file
	// descriptors (its Start refuses Spec.ExtraFiles): gVisor's runsc has no --preserve-fds.
	// hutchd's agent then listens on TCP on the loopback of the sandbox's network namespace
	// instead of a socket hutchd hands over (internal/sandbox).
	RefusesExtraFiles bool
	// DelegatesMemoryLimit is set for a backend whose sandbox kernel does not enforce
	// Spec.Resources.MemoryBytes on the sandbox's processes: gVisor's Sentry accounts their
	// memory but never OOM-kills one, and the host cgroup's limit holds the whole Sentry, whose
	// OOM kill would end the sandbox with its agent. hutchd's agent then enforces the limit
	// itself (hutch-init --memory-limit, internal/agent/oom), and the backend gives the host
	// cgroup room above it for the runtime's own memory (runsc/guard.SentryMemory).
	DelegatesMemoryLimit bool
}

// Pauser is implemented by backends that can freeze a container's processes in place (the
// cgroup freezer) and thaw them again, e.g. to take a consistent snapshot of its disk. A paused
// container keeps its memory and open files; Delete with force removes a paused container too.
type Pauser interface {
	// Pause freezes every process of the running container. Errors: errdefs.ErrNotFound
	// (unknown ID), errdefs.ErrFailedPrecondition (not running).
	Pause(ctx context.Context, id string) error
	// Resume thaws a paused container. Errors: errdefs.ErrNotFound,
	// errdefs.ErrFailedPrecondition (not paused).
	Resume(ctx context.Context, id string) error
}

// LaunchWaiter is implemented by backends whose launch of a container (gVisor's `runsc
// restore`) is a command that outlives a hutchd killed under it and keeps making the
// container. A restarted hutchd waits for such a launch to end before it lists containers,
// so it finds the container made (or not) rather than half-made, and no launch creates a
// container after recovery decided there is none.
type LaunchWaiter interface {
	// WaitLaunch returns once no launch of container id by an earlier process runs, or when
	// ctx ends (its error).
	WaitLaunch(ctx context.Context, id string) error
}

// Adopter is implemented by backends that supervise their running containers from hutchd
// (gVisor's memory guard) or may have changed a container's settings for a moment (runc's
// Pause lifts the CPU quota while it freezes): a restarted hutchd calls Adopt for each running
// container it takes over, as Start would have, and the container's own settings are put back.
type Adopter interface {
	Adopt(id string)
}

// CgroupSweeper is implemented by backends whose containers each have a host cgroup named by
// the container ID below a parent cgroup of hutchd's (runc and runsc: --cgroup-parent). A
// cgroup can outlive its container: a crash of hutchd or the host between the runtime's create
// and delete, or a sandbox whose last processes were still exiting when an earlier hutchd was
// killed. A restarted hutchd sweeps them (Manager.Recover), as it sweeps network namespaces.
type CgroupSweeper interface {
	// SweepCgroups kills the processes of every child cgroup of the parent whose name keep
	// reports false for and removes those cgroups, children first, on every hierarchy. It
	// returns the names it removed. Cgroups of kept containers are not touched.
	SweepCgroups(ctx context.Context, keep func(id string) bool) ([]string, error)
}

// Checkpointer is implemented by backends that can save a running container's whole memory
// and kernel state to disk and start it again from there (gVisor's runsc checkpoint and
// restore): hutchd's sleep keeps running processes this way.
type Checkpointer interface {
	// CheckpointSupport returns nil when this backend, as installed, can save a hutch
	// sandbox (its network and sockets as hutchd sets them up), else an error with
	// errdefs.ErrFailedPrecondition saying why (an older runsc, say): callers then keep to
	// disk-only sleeps.
	CheckpointSupport() error
	// Checkpoint saves container id into the empty directory dir (created if missing) and
	// stops it; the caller still deletes it (Delete). Errors: errdefs.ErrNotFound,
	// errdefs.ErrFailedPrecondition (not running), or the backend's refusal (a state it
	// cannot save); on error the container may be running or stopped.
	Checkpoint(ctx context.Context, id, dir string) error
	// Restore starts spec's container from the image in dir and returns its running state.
	// spec must name the same container, mounts and network namespace path as when it was
	// checkpointed, with the root file system mounted again; no container with the ID may
	// exist (errdefs.ErrAlreadyExists). A missing image gives errdefs.ErrNotFound. On error
	// nothing of the container is left behind.
	Restore(ctx context.Context, spec Spec, dir string) (State, error)
}
