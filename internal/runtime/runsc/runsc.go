// Package runsc is the gVisor backend of internal/runtime: it runs the same OCI spec as the runc
// backend (internal/runtime/ocispec) under runsc, gVisor's runtime, whose Sentry implements the
// Linux system call interface in user space, so code in the sandbox never talks to the host
// kernel directly. Its name as a runtime is "gvisor".
//
// runsc flags (the same on every invocation; see the "gVisor runtime" section of
// docs/ARCHITECTURE.md for why):
//
//   - --platform=systrap (Config.Platform): the Sentry intercepts system calls with seccomp
//     traps in stub processes. The kvm platform hangs under nested virtualisation; ptrace works
//     but costs about 17 host tasks per sandbox process (measured: 200 sleeping processes held
//     3,572 host tasks, against 435 with systrap), so a sandbox's pids limit killed its Sentry
//     at a few dozen processes.
//   - --network=host, with the sandbox's network namespace in the spec's linux.namespaces: the
//     Sentry and its gofer join that namespace (runsc is not run inside it), and the Sentry's
//     sockets are host sockets of that namespace. Loopback dials from hutchd (preview URLs), the
//     DNS and proxy redirects of internal/egress and the namespace's firewall then apply exactly
//     as they do to runc containers. --network=sandbox (gVisor's own netstack) cannot work with
//     this runsc on current kernels: it takes any namespace in which
//     /proc/sys/net/core/rmem_default exists for the host's root namespace, and since Linux 6.x
//     that file exists in every namespace ("cannot run with network enabled in root network
//     namespace").
//   - no --host-uds: runsc cannot hand PID 1 an inherited socket (no --preserve-fds), so
//     hutchd's agent listens on TCP on the namespace's loopback (a host socket through
//     --network=host, reached by hutchd from inside the namespace); unix sockets of the
//     sandbox stay inside the Sentry, where a checkpoint can save them (the Runtime
//     reports runtime.Features.RefusesExtraFiles; Start refuses Spec.ExtraFiles).
//   - --oci-seccomp: the spec's seccomp profile (ocispec.DefaultSeccomp) is applied inside the
//     sandbox by the Sentry, as runc applies it in the host kernel (see adapt).
//   - --file-access=shared: the Sentry caches no file data or metadata of the root file system
//     and writes through at once, because hutchd reads the sandbox's disk from the host while it
//     runs (backups, snapshots, the flush before sleep).
//
// runsc is driven as a runc-compatible binary (internal/runtime/ocicli: state, list, kill,
// delete, the detached start); this package adds the flags above, the spec's adaptation,
// checkpoint and restore, and the memory guard (package guard), which supervises each running
// sandbox from the host. All container state lives in runsc's own state directory
// (Config.Root) and in the bundles; a Runtime keeps none in memory but its guards. Errors from runsc are classified by its stderr text ("does not
// exist" → errdefs.ErrNotFound, "already exists" → errdefs.ErrAlreadyExists, "not running",
// "is paused", … → errdefs.ErrFailedPrecondition); anything else is errdefs.ErrInternal.
package runsc

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/ocicli"
	"github.com/hutchdev/hutch/internal/runtime/runsc/guard"
)

// Name is the runtime name of this backend ("gvisor"), as sandboxes and hutchd's --runtime
// flag spell it.
const Name = "gvisor"

// Config configures a Runtime.
type Config struct {
	// Binary is the runsc executable: a path, or a name looked up on PATH. Empty means "runsc".
	Binary string
	// Root is runsc's state directory (runsc --root), e.g. <stateDir>/runsc. Required.
	Root string
	// BundleDir holds one bundle directory per container (<BundleDir>/<id>/config.json).
	// Required; it must not be the runc backend's.
	BundleDir string
	// CgroupParent is the cgroup (below each hierarchy's root) that holds one cgroup per
	// container; default "hutch". The runc backend of the same hutchd may share it (container
	// IDs are unique across backends).
	CgroupParent string
	// Platform is gVisor's platform: "systrap" (default), "ptrace" or "kvm".
	Platform string
	// Network is runsc's --network: "host" (default; see the package doc) or "none" (no
	// network at all but loopback, which gVisor can checkpoint: hostinet sockets cannot be
	// saved).
	Network string
	// OnGuardKill, if set, is called after each kill of a memory guard (package guard), from
	// the guard's goroutine; it must not block for long. hutchd records it in its audit log.
	OnGuardKill func(GuardKill)
	// AgentProbe, if set, asks container id's agent whether it answers (hutchd: a ping of the
	// agent, sandbox.Manager.PingAgent) and returns an error if it does not before ctx ends. The
	// guard calls it while the sandbox uses its whole CPU quota, and kills when the agent does
	// not answer in time (guard.Supervisor.AgentProbe). Without it the guard has no starved
	// cause.
	AgentProbe func(ctx context.Context, id string) error
}

// GuardKill describes a memory guard's kill (Config.OnGuardKill).
type GuardKill = guard.Kill

// Runtime drives runsc. It is safe for concurrent use on different container IDs.
type Runtime struct {
	cli *ocicli.Driver
	// checkpointSupport is CheckpointSupport's answer, probed once (ProbeCheckpoint).
	checkpointSupport error
	log               *slog.Logger
	// guard runs the memory guards, one per running container, and serialises Pause and
	// Resume with their pauses.
	guard *guard.Supervisor
}

var (
	_ runtime.Runtime      = (*Runtime)(nil)
	_ runtime.Pauser       = (*Runtime)(nil)
	_ runtime.Adopter      = (*Runtime)(nil)
	_ runtime.LaunchWaiter = (*Runtime)(nil)
)

// New checks cfg, creates Root and BundleDir (0700), finds the runsc binary and probes the
// host. A missing binary gives errdefs.ErrUnavailable (code UNAVAILABLE); bad fields give
// errdefs.ErrInvalidArgument. log receives one line per container operation.
func New(cfg Config, log *slog.Logger) (*Runtime, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	platform := cfg.Platform
	if platform == "" {
		platform = "systrap"
	}
	if platform != "systrap" && platform != "ptrace" && platform != "kvm" {
		return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "runsc: platform %q: want systrap, ptrace or kvm", platform)
	}
	network := cfg.Network
	if network == "" {
		network = "host"
	}
	if network != "host" && network != "none" {
		return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "runsc: network %q: want host or none", network)
	}
	cli, err := ocicli.New(cliConfig(cfg, platform, network), log)
	if err != nil {
		return nil, err
	}
	g := guard.New(cli, log)
	g.OnKill, g.AgentProbe = cfg.OnGuardKill, cfg.AgentProbe
	return &Runtime{cli: cli, checkpointSupport: ProbeCheckpoint(cli.Binary()), log: log, guard: g}, nil
}

// cliConfig is the ocicli configuration of runsc for cfg, with platform and network checked.
func cliConfig(cfg Config, platform, network string) ocicli.Config {
	return ocicli.Config{
		Name: "runsc", Binary: cfg.Binary, InstallHint: " (apt-get install runsc)",
		Root: cfg.Root, BundleDir: cfg.BundleDir, CgroupParent: cfg.CgroupParent,
		GlobalFlags: func(path string) ([]string, error) { return globalFlags(path, platform, network) },
		IDSuffix:    runscIDSuffix,
		Classes: []ocicli.Class{
			{Err: errdefs.ErrNotFound, Text: []string{"does not exist", "no such file"}},
			{Err: errdefs.ErrAlreadyExists, Text: []string{"already exists"}},
			{Err: errdefs.ErrFailedPrecondition, Text: []string{"not running", "is not paused", "is paused",
				"cannot pause", "cannot resume", "not stopped", "invalid state"}},
		},
		// A sandbox whose processes died under runsc (killed from outside) can make a
		// forced delete fail with any message; the sweep kills what is left.
		SweepRetry: func(error) bool { return true },
	}
}

// runscError is runsc's stderr for a failed invocation, classified.
func runscError(op, id string, err error, stderr string) error {
	return cliConfig(Config{}, "", "").Error(op, id, err, stderr)
}

// globalFlags are the flags of every invocation of the runsc at path, after --root (see the
// package doc).
func globalFlags(path, platform, network string) ([]string, error) {
	flags, err := probeFlags(path)
	if err != nil {
		return nil, err
	}
	global := []string{
		"--platform", platform,
		"--network", network,
		"--file-access", "shared",
		"--oci-seccomp",
	}
	if flags["gofer-network-namespace"] {
		// Each gofer gets a new empty network namespace. The default ("null") bind-mounts one
		// shared namespace at <root>/null-netns and never unmounts it, so the state directory
		// could not be removed once the last container is gone.
		global = append(global, "--gofer-network-namespace", "new")
	}
	if flags["overlay2"] {
		// The root file system stays the host directory the Sentry writes through to: hutchd
		// reads it while the sandbox runs (see --file-access=shared above).
		global = append(global, "--overlay2", "none")
	}
	return global, nil
}

// probeFlags returns the global flags the runsc at path knows, from `runsc flags` ("-name"
// at the start of a line, as Go's flag package prints them). Releases differ: Debian's
// 20221219 has no --overlay2, later ones default it to "root:self", which they refuse
// together with --file-access=shared.
func probeFlags(path string) (map[string]bool, error) {
	out, err := exec.Command(path, "flags").CombinedOutput() // printed on stderr
	if err != nil {
		return nil, errdefs.Newf(errdefs.CodeUnavailable, "runsc: %s flags: %w", path, err)
	}
	flags := make(map[string]bool)
	for _, line := range strings.Split(string(out), "\n") {
		if name, ok := strings.CutPrefix(line, "  -"); ok {
			name, _, _ = strings.Cut(name, " ")
			flags[name] = true
		}
	}
	return flags, nil
}

// Name returns "gvisor".
func (r *Runtime) Name() string { return Name }

// Features: runsc refuses Spec.ExtraFiles (see the package doc), and the Sentry never
// OOM-kills a process of the sandbox (see adapt and guard.SentryMemory).
func (r *Runtime) Features() runtime.Features {
	return runtime.Features{RefusesExtraFiles: true, DelegatesMemoryLimit: true}
}

// BuildSpec turns a runtime.Spec into the OCI spec written to the bundle: ocispec's, without
// the parts runsc rejects or does not apply (see adapt).
func (r *Runtime) BuildSpec(s runtime.Spec) (*specs.Spec, error) {
	if s.IDMap.Enabled() {
		// The Sentry is the sandbox's kernel and has user namespaces of its own.
		return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "runsc: container %s: host user namespaces are for runc only", s.ID)
	}
	spec, err := r.cli.Spec().Build(s)
	if err != nil {
		return nil, err
	}
	adapt(spec)
	keepTmpOnDisk(spec, s.RootFS)
	if spec.Linux.Resources != nil && spec.Linux.Resources.Memory != nil && spec.Linux.Resources.Memory.Limit != nil {
		spec.Mounts = append(spec.Mounts, r.guard.Mount(s.ID)) // the memory guard's files
	}
	return spec, nil
}

// keepTmpOnDisk binds the root file system's own /tmp over /tmp. Without a mount at /tmp in
// the spec, runsc mounts a tmpfs there (an optimisation of the Sentry when the image's /tmp
// is empty), so files in /tmp would live in memory: lost at sleep, stop, snapshot and fork,
// missing from backups, and charged to memory instead of the disk quota, unlike on runc.
func keepTmpOnDisk(spec *specs.Spec, rootFS string) {
	for _, m := range spec.Mounts {
		if filepath.Clean(m.Destination) == "/tmp" {
			return
		}
	}
	src := filepath.Join(rootFS, "tmp")
	if st, err := os.Lstat(src); err != nil || !st.IsDir() {
		return // no directory to bind (a symlink is never followed): runsc's tmpfs stays
	}
	spec.Mounts = append(spec.Mounts, specs.Mount{Destination: "/tmp", Type: "bind", Source: src, Options: []string{"rbind", "rw"}})
}

// adapt changes the shared spec for runsc. The Sentry provides its own /proc, /sys, /dev,
// devpts and cgroupfs and is the only process that talks to the host kernel, so:
//   - the seccomp profile stays: with --oci-seccomp the Sentry applies it to the sandbox's
//     processes (gVisor's own filters guard the host from the Sentry itself). The calls it
//     refuses (unshare, setns, ptrace, perf_event_open, io_uring, …) would reach only the
//     Sentry, never the host kernel, but each is Sentry code an attacker need not reach, and
//     with the same profile a program sees the same answers on both runtimes;
//   - sysctls are host kernel settings runsc does not support (IPv6 in the namespace is off
//     already: the namespace has no IPv6 addresses and the egress firewall drops IPv6);
//   - the device cgroup rules stay (runsc applies them to its own processes).
//
// runsc builds its seccomp program with EPERM for every errno action: it ignores ErrnoRet, so
// the profile's "clone3 answers ENOSYS" rule would answer EPERM, and glibc, which falls back to
// clone only on ENOSYS, could not start threads. An allow rule is no answer either: the runsc
// hutch targets implements clone3, whose flags (in memory) seccomp cannot read, so CLONE_NEW*
// would reach the Sentry past the clone rule. The rule becomes SCMP_ACT_TRACE instead: with no
// tracer attached the Sentry answers ENOSYS without running the call (as Linux does), and
// nothing in the sandbox can attach one, since the same profile refuses ptrace
// (TestSeccompInSentry checks the answer).
//
// runsc looks names up in its own system call table and skips the ones it lacks (it logs
// "OCI seccomp: ignoring syscall"). Two consequences: a call named differently there must be
// named its way (pselect6 is "pselect" in this runsc: without it readline's pselect fails and
// an interactive bash exits at once), and a call this Sentry does not implement answers EPERM
// instead of ENOSYS (openat2, fchmodat2, futex_waitv, landlock_*, …: libcs that fall back only
// on ENOSYS fail there instead).
//
// The pids limit moves into the Sentry: the sandbox's processes get RLIMIT_NPROC = the limit,
// which the Sentry enforces on every task of uid 0 (it exempts only CAP_SYS_ADMIN and
// CAP_SYS_RESOURCE, which sandboxes lack), and the host cgroup gets guard.SentryPids(limit), room
// for the Sentry's own threads and the platform's stub tasks as well (see SentryPids).
//
// The memory limit moves into the sandbox too: the Sentry never OOM-kills one of its
// processes, so hutchd's agent enforces the limit (runtime.MemoryLimitDelegator), and the host
// cgroup gets guard.SentryMemory(limit), room for the Sentry's own memory and the agent's polling
// interval as well. The Sentry reports the host limit as the sandbox's memory (MemTotal, the
// cgroupfs memory.limit_in_bytes); the agent kills at the sandbox's own.
func adapt(spec *specs.Spec) {
	spec.Linux.Sysctl = nil
	if res := spec.Linux.Resources; res != nil && res.Memory != nil && res.Memory.Limit != nil && *res.Memory.Limit > 0 {
		var pids int64
		if res.Pids != nil && res.Pids.Limit > 0 {
			pids = res.Pids.Limit // before SentryPids below
		}
		host := guard.SentryMemory(*res.Memory.Limit, pids)
		res.Memory.Limit = &host
		if res.Memory.Swap != nil && *res.Memory.Swap > 0 {
			swap := host // memory+swap = memory: still no swap
			res.Memory.Swap = &swap
		}
	}
	if res := spec.Linux.Resources; res != nil && res.Pids != nil && res.Pids.Limit > 0 && spec.Process != nil {
		n := uint64(res.Pids.Limit)
		spec.Process.Rlimits = slices.DeleteFunc(spec.Process.Rlimits, func(r specs.POSIXRlimit) bool { return r.Type == "RLIMIT_NPROC" })
		spec.Process.Rlimits = append(spec.Process.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_NPROC", Hard: n, Soft: n})
		res.Pids.Limit = guard.SentryPids(res.Pids.Limit)
	}
	if sc := spec.Linux.Seccomp; sc != nil {
		for i, rule := range sc.Syscalls {
			if slices.Equal(rule.Names, []string{"clone3"}) && rule.Action == specs.ActErrno {
				sc.Syscalls[i] = specs.LinuxSyscall{Names: rule.Names, Action: specs.ActTrace}
			}
		}
		if slices.ContainsFunc(sc.Syscalls, func(r specs.LinuxSyscall) bool {
			return r.Action == specs.ActAllow && len(r.Args) == 0 && slices.Contains(r.Names, "pselect6")
		}) {
			sc.Syscalls = append(sc.Syscalls, specs.LinuxSyscall{Names: []string{"pselect"}, Action: specs.ActAllow})
		}
	}
}

// runscIDSuffix makes the container ID runsc knows sandbox id by: id + ".". runsc takes an ID
// on its command line as a prefix and refuses one that starts several IDs ("creds" with "creds"
// and "creds-fork" running: "id is ambiguous", even though one matches exactly); sandbox IDs
// never contain ".", so with the suffix no ID is a prefix of another. The driver adds it to
// every ID it passes (ocicli.Driver.CLIID) and removes it from the IDs runsc lists.
const runscIDSuffix = "."

func (r *Runtime) bundle(id string) string { return r.cli.Bundle(id) }
