// Package ocispec builds the OCI runtime spec (config.json) that hutch's OCI backends (runc,
// runsc) run a runtime.Spec with, and owns what that spec depends on: the host facts probed
// once (cgroup version, swap accounting, namespaces, rlimits), the container ID rule, the
// cgroup layout (<hierarchy>/<parent>/<id>) and its removal, and the bundle directory.
//
// Both backends run the same spec, so a sandbox gets the same capabilities, mounts, limits and
// namespaces whichever backend runs it; backend-specific choices (runsc's flags) stay in the
// backend's package.
package ocispec

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/sandboxid"
)

// Host is what the generated spec depends on, probed once with ProbeHost.
type Host struct {
	Cgroup2     bool     // unified hierarchy at /sys/fs/cgroup
	MemSwap     bool     // v1 memory.memsw.* present (swap accounting)
	CgroupNS    bool     // kernel has cgroup namespaces
	IPv6        bool     // /proc/sys/net/ipv6 exists
	NoFile      uint64   // RLIMIT_NOFILE for PID 1 (never above our hard limit)
	MsgQueue    uint64   // RLIMIT_MSGQUEUE for PID 1 (never above our hard limit)
	SigPending  uint64   // RLIMIT_SIGPENDING for PID 1 (never above our hard limit)
	CgroupRoots []string // directories under which containers' <parent>/<id> cgroups live
}

// MaxNoFile caps RLIMIT_NOFILE (soft and hard) in containers: enough for Node, watchers and
// databases, low enough that a process that opens files in a loop stops with EMFILE long before
// it troubles the host (open files are also charged to the sandbox's memory cgroup).
const MaxNoFile = 1 << 16

// MaxMsgQueue and MaxSigPending cap RLIMIT_MSGQUEUE (bytes of POSIX message queues) and
// RLIMIT_SIGPENDING (queued signals) in containers. The kernel counts both per user of the
// sandbox (these limits) and again per sandbox, at its user namespace's owner (bounded by
// hutchd's own limits when the namespace was made; see idmap.ContainerUserNS): a sandbox's
// users may hold at most these each, a whole sandbox at most hutchd's, and none takes from
// another sandbox or from the host. MaxMsgQueue is the kernel's default; MaxSigPending leaves
// room for programs that queue real-time signals, well below a default (~ RLIMIT_NPROC).
const (
	MaxMsgQueue   = 819200
	MaxSigPending = 1 << 14
)

// ProbeHost reads the host facts of Host from /sys/fs/cgroup, /proc and our rlimits.
func ProbeHost() (Host, error) {
	var h Host
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		return h, fmt.Errorf("oci spec: statfs /sys/fs/cgroup: %w", err)
	}
	h.Cgroup2 = st.Type == unix.CGROUP2_SUPER_MAGIC
	if h.Cgroup2 {
		h.CgroupRoots = []string{"/sys/fs/cgroup"}
	} else {
		_, err := os.Stat("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes")
		h.MemSwap = err == nil
		entries, err := os.ReadDir("/sys/fs/cgroup")
		if err != nil {
			return h, fmt.Errorf("oci spec: %w", err)
		}
		for _, e := range entries {
			if e.IsDir() { // symlinks (cpu -> cpu,cpuacct) are skipped
				h.CgroupRoots = append(h.CgroupRoots, filepath.Join("/sys/fs/cgroup", e.Name()))
			}
		}
	}
	_, err := os.Stat("/proc/self/ns/cgroup")
	h.CgroupNS = err == nil
	_, err = os.Stat("/proc/sys/net/ipv6")
	h.IPv6 = err == nil
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return h, fmt.Errorf("oci spec: getrlimit: %w", err)
	}
	h.NoFile = min(rl.Max, MaxNoFile)
	if err := unix.Getrlimit(unix.RLIMIT_MSGQUEUE, &rl); err != nil {
		return h, fmt.Errorf("oci spec: getrlimit: %w", err)
	}
	h.MsgQueue = min(rl.Max, MaxMsgQueue)
	if err := unix.Getrlimit(unix.RLIMIT_SIGPENDING, &rl); err != nil {
		return h, fmt.Errorf("oci spec: getrlimit: %w", err)
	}
	h.SigPending = min(rl.Max, MaxSigPending)
	return h, nil
}

// Builder turns runtime.Specs into OCI specs for one host and cgroup parent.
type Builder struct {
	Host Host
	// CgroupParent is the cgroup (below each hierarchy's root) holding one cgroup per
	// container, e.g. "hutch"; it must pass CheckID.
	CgroupParent string
}

// CheckID fails with errdefs.ErrInvalidArgument unless id follows the sandbox ID grammar
// (internal/sandboxid: 1–63 of [a-z0-9-], no hyphen at either end): a container ID, or a cgroup
// parent name. Reserved names are the API's concern, not a path's: "hutch" is a fine parent.
func CheckID(id string) error {
	if err := sandboxid.CheckName(id); err != nil {
		return errdefs.Wrap(errdefs.CodeInvalidArgument, err, "invalid container id "+strconv.Quote(id))
	}
	return nil
}

// CgroupPath is the spec's cgroupsPath of container id, relative to each hierarchy's root:
// "/<parent>/<id>".
func (b Builder) CgroupPath(id string) string { return "/" + b.CgroupParent + "/" + id }

// CgroupDirs returns the host cgroup directories container id uses (whether or not they
// exist): /sys/fs/cgroup/<parent>/<id> on v2, /sys/fs/cgroup/<hierarchy>/<parent>/<id> on v1.
func (b Builder) CgroupDirs(id string) []string {
	var dirs []string
	for _, root := range b.Host.CgroupRoots {
		dirs = append(dirs, filepath.Join(root, b.CgroupPath(id)))
	}
	return dirs
}

// WriteBundle (re)creates the bundle directory dir (0700) with config.json holding spec. A
// directory left by an earlier crash is replaced.
func WriteBundle(dir string, spec any) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove stale bundle: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode spec: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		return fmt.Errorf("write spec: %w", err)
	}
	return nil
}
