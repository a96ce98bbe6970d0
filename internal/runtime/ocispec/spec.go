package ocispec

import (
	"fmt"
	"path/filepath"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
)

// Capabilities is the capability set of every container process (bounding, effective,
// permitted): Docker's default set minus CAP_NET_RAW and CAP_MKNOD. Root inside keeps what
// installing packages and running services as other users needs; each kept capability, and why:
//   - CAP_AUDIT_WRITE: PAM (su, login, sudo) writes audit records and fails without it.
//   - CAP_CHOWN, CAP_FOWNER, CAP_FSETID: dpkg, tar and cp -a set owners and modes of files.
//   - CAP_DAC_OVERRIDE: root reads and writes files of other users (package caches, homes).
//   - CAP_KILL: root signals processes that run as other users (services, the agent's kills).
//   - CAP_NET_BIND_SERVICE: servers on ports below 1024 (previews of port 80).
//   - CAP_SETUID, CAP_SETGID: su, sudo, postgres, … switch to an unprivileged user.
//   - CAP_SETPCAP: tools that drop capabilities from their bounding set before running a child.
//   - CAP_SETFCAP: dpkg postinst scripts (setcap on ping and friends); file capabilities
//     cannot raise anything under no_new_privs.
//   - CAP_SYS_CHROOT: build tools and package scripts that chroot (debootstrap, dpkg --root).
//
// Dropped: CAP_NET_RAW (raw and packet sockets: ARP and ICMP spoofing on the bridge) and
// CAP_MKNOD (device nodes are refused by the device cgroup anyway; without the capability none
// can even be made). Never granted: CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_SYS_PTRACE,
// CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_TIME, CAP_SYSLOG, CAP_BPF, CAP_PERFMON, ….
var Capabilities = []string{
	"CAP_AUDIT_WRITE",
	"CAP_CHOWN",
	"CAP_DAC_OVERRIDE",
	"CAP_FOWNER",
	"CAP_FSETID",
	"CAP_KILL",
	"CAP_NET_BIND_SERVICE",
	"CAP_SETFCAP",
	"CAP_SETGID",
	"CAP_SETPCAP",
	"CAP_SETUID",
	"CAP_SYS_CHROOT",
}

// defaultPath is PID 1's PATH when Spec.Env has none.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// cpuPeriod is the CFS period (µs) used with Resources.MilliCPU.
const cpuPeriod = 100000

// devices allowed in the device cgroup after a deny-all rule: runc's defaults.
var allowedDevices = []struct {
	typ          string
	major, minor int64 // minor -1 = all
}{
	{"c", 1, 3},    // /dev/null
	{"c", 1, 5},    // /dev/zero
	{"c", 1, 7},    // /dev/full
	{"c", 1, 8},    // /dev/random
	{"c", 1, 9},    // /dev/urandom
	{"c", 5, 0},    // /dev/tty
	{"c", 5, 2},    // /dev/ptmx
	{"c", 136, -1}, // /dev/pts/*
}

// Build turns a runtime.Spec into the OCI spec written to the bundle. Empty Hostname means
// the ID, empty Cwd means "/", and an Env without PATH gets a standard PATH. It fails with
// errdefs.ErrInvalidArgument on a bad ID, relative paths or empty Args.
func (b Builder) Build(s runtime.Spec) (*specs.Spec, error) {
	if err := CheckID(s.ID); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(s.RootFS) {
		return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "oci spec: rootfs %q is not absolute", s.RootFS)
	}
	if len(s.Args) == 0 {
		return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "oci spec: empty args for container %s", s.ID)
	}
	hostname := s.Hostname
	if hostname == "" {
		hostname = s.ID
	}
	cwd := s.Cwd
	if cwd == "" {
		cwd = "/"
	}
	env := append([]string{}, s.Env...)
	hasPath := false
	for _, e := range env {
		hasPath = hasPath || strings.HasPrefix(e, "PATH=")
	}
	if !hasPath {
		env = append([]string{defaultPath}, env...)
	}

	caps := append([]string{}, Capabilities...)
	spec := &specs.Spec{
		Version: specs.Version,
		Root:    &specs.Root{Path: s.RootFS, Readonly: false},
		Process: &specs.Process{
			Terminal: false,
			User:     specs.User{UID: 0, GID: 0},
			Args:     append([]string{}, s.Args...),
			Env:      env,
			Cwd:      cwd,
			Capabilities: &specs.LinuxCapabilities{
				Bounding:  caps,
				Effective: caps,
				Permitted: caps,
			},
			Rlimits:         b.rlimits(),
			NoNewPrivileges: true,
		},
		Hostname: hostname,
		Mounts:   defaultMounts(),
		Linux: &specs.Linux{
			CgroupsPath: b.CgroupPath(s.ID),
			Namespaces:  b.namespaces(s.NetNSPath),
			Resources:   b.resources(s.Resources),
			Seccomp:     DefaultSeccomp(),
			MaskedPaths: []string{
				"/proc/acpi",
				"/proc/asound",
				"/proc/kcore",
				"/proc/keys",
				"/proc/latency_stats",
				"/proc/timer_list",
				"/proc/timer_stats",
				"/proc/sched_debug",
				"/proc/scsi",
				"/sys/firmware",
				"/sys/devices/virtual/powercap",
				// Beyond runc's and Docker's defaults: kernel symbols and log, and the
				// mount points of the kernel's debug, tracing, security and BPF file systems
				// (empty in a fresh sysfs; masked in case a kernel populates them).
				"/proc/kallsyms",
				"/proc/kmsg",
				"/proc/config.gz",
				"/sys/kernel/debug",
				"/sys/kernel/tracing",
				"/sys/kernel/security",
				"/sys/kernel/config",
				"/sys/fs/bpf",
			},
			ReadonlyPaths: []string{
				"/proc/bus",
				"/proc/fs",
				"/proc/irq",
				"/proc/sys",
				"/proc/sysrq-trigger",
			},
		},
	}
	if b.Host.IPv6 {
		// Both cases of NetNSPath are private namespaces (hutch's own or a fresh one).
		spec.Linux.Sysctl = map[string]string{
			"net.ipv6.conf.all.disable_ipv6":     "1",
			"net.ipv6.conf.default.disable_ipv6": "1",
		}
	}
	for _, m := range s.Mounts {
		if !filepath.IsAbs(m.Source) || !filepath.IsAbs(m.Destination) {
			return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "oci spec: mount %s -> %s: paths must be absolute", m.Source, m.Destination)
		}
		opts := []string{"rbind", "rprivate"}
		if m.ReadOnly {
			opts = append(opts, "ro")
		} else {
			opts = append(opts, "rw")
		}
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: m.Destination, Type: "bind", Source: m.Source, Options: opts})
	}
	if s.IDMap.Enabled() {
		userNS(spec, s.IDMap)
	}
	return spec, nil
}

// rlimits are PID 1's resource limits, inherited by every process of the sandbox:
// RLIMIT_NOFILE; RLIMIT_NICE and RLIMIT_RTPRIO at 0, soft and hard; and RLIMIT_MSGQUEUE and
// RLIMIT_SIGPENDING when probed (a Host without them keeps the runtime's own).
//
// RLIMIT_NICE 0 lets no process lower its nice value (raise its CPU priority) and
// RLIMIT_RTPRIO 0 lets none take a real-time scheduling class; without CAP_SYS_NICE (never in
// Capabilities) these limits are all that decide, and hutchd's own limits, which the sandbox
// would otherwise inherit through the runtime, may be higher (a service manager's LimitNICE).
// So commands stay below the agent (they run at nice 19). Raising a hard limit needs
// CAP_SYS_RESOURCE, which the sandbox lacks.
func (b Builder) rlimits() []specs.POSIXRlimit {
	rl := []specs.POSIXRlimit{
		{Type: "RLIMIT_NOFILE", Hard: b.Host.NoFile, Soft: b.Host.NoFile},
		{Type: "RLIMIT_NICE", Hard: 0, Soft: 0},
		{Type: "RLIMIT_RTPRIO", Hard: 0, Soft: 0},
	}
	if b.Host.MsgQueue > 0 {
		rl = append(rl, specs.POSIXRlimit{Type: "RLIMIT_MSGQUEUE", Hard: b.Host.MsgQueue, Soft: b.Host.MsgQueue})
	}
	if b.Host.SigPending > 0 {
		rl = append(rl, specs.POSIXRlimit{Type: "RLIMIT_SIGPENDING", Hard: b.Host.SigPending, Soft: b.Host.SigPending})
	}
	return rl
}

func defaultMounts() []specs.Mount {
	return []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
	}
}

func (b Builder) namespaces(netns string) []specs.LinuxNamespace {
	ns := []specs.LinuxNamespace{
		{Type: specs.PIDNamespace},
		{Type: specs.IPCNamespace},
		{Type: specs.UTSNamespace},
		{Type: specs.MountNamespace},
		{Type: specs.NetworkNamespace, Path: netns},
	}
	if b.Host.CgroupNS {
		ns = append(ns, specs.LinuxNamespace{Type: specs.CgroupNamespace})
	}
	return ns
}

func (b Builder) resources(res runtime.Resources) *specs.LinuxResources {
	out := &specs.LinuxResources{
		Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
	}
	for _, d := range allowedDevices {
		major := d.major
		rule := specs.LinuxDeviceCgroup{Allow: true, Type: d.typ, Major: &major, Access: "rwm"}
		if d.minor >= 0 {
			minor := d.minor
			rule.Minor = &minor
		}
		out.Devices = append(out.Devices, rule)
	}
	if res.MilliCPU > 0 {
		quota, period := res.MilliCPU*cpuPeriod/1000, uint64(cpuPeriod)
		shares := CPUShares(res.MilliCPU)
		out.CPU = &specs.LinuxCPU{Quota: &quota, Period: &period, Shares: &shares}
	}
	if res.MemoryBytes > 0 {
		limit := res.MemoryBytes
		out.Memory = &specs.LinuxMemory{Limit: &limit}
		// Memory+swap = memory: no swap. On v2 runc writes memory.swap.max=0 and tolerates a
		// kernel without swap accounting; on v1 the file must exist.
		if b.Host.Cgroup2 || b.Host.MemSwap {
			swap := limit
			out.Memory.Swap = &swap
		}
		if !b.Host.Cgroup2 {
			swappiness := uint64(0)
			out.Memory.Swappiness = &swappiness
		}
	}
	if res.Pids > 0 {
		out.Pids = &specs.LinuxPids{Limit: res.Pids}
	}
	return out
}

// CPUShares is the cgroup v1 cpu.shares of a container of milliCPU thousandths of a CPU: 1024
// per CPU, as Kubernetes does, at least 2 (the kernel's minimum). Under contention CPU time is
// shared in proportion to it, so a busy sandbox cannot take more than its share from the
// others; the quota caps it even when the host is idle. On cgroup v2 runc converts it to
// cpu.weight (1 + (shares-2)*9999/262142).
func CPUShares(milliCPU int64) uint64 {
	return uint64(max(2, milliCPU*1024/1000))
}

// CheckSpec validates the parts of a spec that Build does not (log path, limits); errors are
// errdefs.ErrInvalidArgument.
func CheckSpec(s runtime.Spec) error {
	if s.LogPath != "" && !filepath.IsAbs(s.LogPath) {
		return errdefs.Newf(errdefs.CodeInvalidArgument, "oci spec: log path %q is not absolute", s.LogPath)
	}
	if s.Resources.MilliCPU < 0 || s.Resources.MemoryBytes < 0 || s.Resources.Pids < 0 {
		return errdefs.Newf(errdefs.CodeInvalidArgument, "oci spec: negative resource limit %+v", s.Resources)
	}
	return nil
}

// Describe is a one-line summary of s's limits and network for logs.
func Describe(s runtime.Spec) string {
	return fmt.Sprintf("cpu=%dm mem=%d pids=%d netns=%q", s.Resources.MilliCPU, s.Resources.MemoryBytes, s.Resources.Pids, s.NetNSPath)
}
