package ocispec

import (
	"errors"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/idmap"
	"github.com/hutchdev/hutch/internal/runtime"
)

func testRuntime(h Host) Builder { return Builder{Host: h, CgroupParent: "hutch"} }

func TestBuildSpec(t *testing.T) {
	r := testRuntime(Host{MemSwap: true, CgroupNS: true, IPv6: true, NoFile: 4096, MsgQueue: 1000, SigPending: 100})
	spec, err := r.Build(runtime.Spec{
		ID:        "abc-1",
		RootFS:    "/var/lib/hutch/sandboxes/abc-1/merged",
		Args:      []string{"/hutch-init", "--serve"},
		Env:       []string{"FOO=bar"},
		NetNSPath: "/var/run/netns/hutch-abc-1",
		Mounts: []runtime.Mount{
			{Source: "/opt/hutch-init", Destination: "/hutch-init", ReadOnly: true},
			{Source: "/srv/resolv", Destination: "/etc/resolv.conf"},
		},
		Resources: runtime.Resources{MilliCPU: 250, MemoryBytes: 512 << 20, Pids: 128},
	})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Hostname != "abc-1" || spec.Process.Cwd != "/" || spec.Root.Readonly {
		t.Errorf("hostname %q cwd %q readonly %v", spec.Hostname, spec.Process.Cwd, spec.Root.Readonly)
	}
	if spec.Process.Env[0] != defaultPath || spec.Process.Env[1] != "FOO=bar" {
		t.Errorf("env = %v", spec.Process.Env)
	}
	if !spec.Process.NoNewPrivileges || spec.Process.OOMScoreAdj != nil {
		t.Errorf("noNewPrivileges %v oomScoreAdj %v", spec.Process.NoNewPrivileges, spec.Process.OOMScoreAdj)
	}
	wantRL := []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 4096, Soft: 4096},
		{Type: "RLIMIT_NICE", Hard: 0, Soft: 0}, {Type: "RLIMIT_RTPRIO", Hard: 0, Soft: 0},
		{Type: "RLIMIT_MSGQUEUE", Hard: 1000, Soft: 1000}, {Type: "RLIMIT_SIGPENDING", Hard: 100, Soft: 100}}
	if rl := spec.Process.Rlimits; !slices.Equal(rl, wantRL) {
		t.Errorf("rlimits = %+v, want %+v", rl, wantRL)
	}
	caps := spec.Process.Capabilities
	if !slices.Equal(caps.Bounding, Capabilities) || !slices.Equal(caps.Effective, Capabilities) || len(caps.Inheritable) != 0 || len(caps.Ambient) != 0 {
		t.Errorf("capabilities = %+v", caps)
	}
	for _, c := range []string{"CAP_NET_RAW", "CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_NET_ADMIN"} {
		if slices.Contains(caps.Bounding, c) {
			t.Errorf("%s granted", c)
		}
	}
	if spec.Linux.CgroupsPath != "/hutch/abc-1" {
		t.Errorf("cgroupsPath = %q", spec.Linux.CgroupsPath)
	}
	var types []specs.LinuxNamespaceType
	for _, ns := range spec.Linux.Namespaces {
		types = append(types, ns.Type)
		if ns.Type == specs.NetworkNamespace && ns.Path != "/var/run/netns/hutch-abc-1" {
			t.Errorf("netns path = %q", ns.Path)
		}
	}
	for _, want := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.MountNamespace, specs.NetworkNamespace, specs.CgroupNamespace} {
		if !slices.Contains(types, want) {
			t.Errorf("namespace %s missing", want)
		}
	}
	res := spec.Linux.Resources
	if *res.CPU.Quota != 25000 || *res.CPU.Period != 100000 || *res.CPU.Shares != 256 {
		t.Errorf("cpu = %d/%d shares %d", *res.CPU.Quota, *res.CPU.Period, *res.CPU.Shares)
	}
	for milli, want := range map[int64]uint64{1: 2, 62: 63, 500: 512, 1000: 1024, 4000: 4096} {
		if got := CPUShares(milli); got != want {
			t.Errorf("CPUShares(%d) = %d, want %d", milli, got, want)
		}
	}
	if *res.Memory.Limit != 512<<20 || *res.Memory.Swap != 512<<20 || *res.Memory.Swappiness != 0 {
		t.Errorf("memory = %+v", res.Memory)
	}
	if res.Pids.Limit != 128 {
		t.Errorf("pids = %d", res.Pids.Limit)
	}
	if d := res.Devices[0]; d.Allow || d.Access != "rwm" || d.Type != "" {
		t.Errorf("first device rule %+v, want deny all", d)
	}
	if spec.Linux.Sysctl["net.ipv6.conf.all.disable_ipv6"] != "1" {
		t.Errorf("sysctl = %v", spec.Linux.Sysctl)
	}
	last := spec.Mounts[len(spec.Mounts)-2:]
	if last[0].Destination != "/hutch-init" || !slices.Contains(last[0].Options, "ro") || !slices.Contains(last[1].Options, "rw") || last[1].Type != "bind" {
		t.Errorf("bind mounts = %+v", last)
	}
	if spec.Linux.Seccomp == nil || spec.Linux.Seccomp.DefaultAction != specs.ActErrno {
		t.Errorf("seccomp = %+v", spec.Linux.Seccomp)
	}
}

func TestBuildSpecHostVariants(t *testing.T) {
	// cgroup v2: swap always set (runc tolerates missing swap accounting), no swappiness.
	spec, err := testRuntime(Host{Cgroup2: true, NoFile: 1024}).Build(runtime.Spec{ID: "x", RootFS: "/r", Args: []string{"sh"}, Resources: runtime.Resources{MemoryBytes: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	if m := spec.Linux.Resources.Memory; m.Swap == nil || *m.Swap != 1<<30 || m.Swappiness != nil {
		t.Errorf("v2 memory = %+v", m)
	}
	if spec.Linux.Sysctl != nil || spec.Linux.Resources.CPU != nil || spec.Linux.Resources.Pids != nil {
		t.Errorf("unexpected sysctl %v / cpu %v / pids %v", spec.Linux.Sysctl, spec.Linux.Resources.CPU, spec.Linux.Resources.Pids)
	}
	for _, ns := range spec.Linux.Namespaces {
		if ns.Type == specs.CgroupNamespace {
			t.Error("cgroup namespace without kernel support")
		}
	}
	// cgroup v1 without swap accounting: no memory+swap limit.
	spec, _ = testRuntime(Host{NoFile: 1024}).Build(runtime.Spec{ID: "x", RootFS: "/r", Args: []string{"sh"}, Resources: runtime.Resources{MemoryBytes: 1 << 30}})
	if spec.Linux.Resources.Memory.Swap != nil {
		t.Error("swap limit set without memsw")
	}
}

func TestBuildSpecRejects(t *testing.T) {
	r := testRuntime(Host{NoFile: 1024})
	ok := runtime.Spec{ID: "ok", RootFS: "/r", Args: []string{"sh"}}
	for name, mod := range map[string]func(*runtime.Spec){
		"uppercase id":   func(s *runtime.Spec) { s.ID = "Bad" },
		"empty id":       func(s *runtime.Spec) { s.ID = "" },
		"long id":        func(s *runtime.Spec) { s.ID = string(make([]byte, 64)) },
		"relative root":  func(s *runtime.Spec) { s.RootFS = "rootfs" },
		"no args":        func(s *runtime.Spec) { s.Args = nil },
		"relative mount": func(s *runtime.Spec) { s.Mounts = []runtime.Mount{{Source: "a", Destination: "/b"}} },
	} {
		s := ok
		mod(&s)
		if _, err := r.Build(s); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if err := CheckSpec(runtime.Spec{LogPath: "rel"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("relative log path: %v", err)
	}
}

func TestDefaultSeccomp(t *testing.T) {
	sc := DefaultSeccomp()
	if sc.DefaultAction != specs.ActErrno || sc.DefaultErrnoRet == nil || *sc.DefaultErrnoRet != 1 {
		t.Fatalf("default action %s errno %v; want ERRNO(EPERM)", sc.DefaultAction, sc.DefaultErrnoRet)
	}
	allowed := map[string]bool{}
	conditional := map[string]bool{}
	for _, s := range sc.Syscalls {
		for _, n := range s.Names {
			if s.Action == specs.ActAllow && len(s.Args) == 0 {
				allowed[n] = true
			}
			if s.Action == specs.ActAllow && len(s.Args) > 0 {
				conditional[n] = true
				// runc ORs comparisons on one argument: every conditional rule has one.
				if len(s.Args) != 1 {
					t.Errorf("%s: rule with %d comparisons", n, len(s.Args))
				}
			}
		}
	}
	for _, name := range []string{"mount", "umount2", "unshare", "setns", "bpf", "io_uring_setup", "keyctl", "add_key",
		"request_key", "ptrace", "process_vm_readv", "userfaultfd", "kexec_load", "init_module", "finit_module",
		"delete_module", "open_by_handle_at", "name_to_handle_at", "perf_event_open", "pivot_root", "reboot",
		"swapon", "syslog", "settimeofday", "clock_settime", "iopl", "ioperm", "fsopen", "move_mount", "open_tree",
		"quotactl", "kcmp", "socketcall", "sethostname", "acct", "lookup_dcookie", "fanotify_init", "vhangup"} {
		if allowed[name] || conditional[name] {
			t.Errorf("%s allowed", name)
		}
	}
	for _, name := range []string{"execve", "read", "openat", "pipe", "pipe2", "statx", "futex", "rseq", "epoll_pwait2", "pidfd_open", "wait4", "chroot"} {
		if !allowed[name] {
			t.Errorf("%s not allowed", name)
		}
	}
	for _, name := range []string{"clone", "socket", "personality"} {
		if allowed[name] || !conditional[name] {
			t.Errorf("%s: want allowed with an argument filter only", name)
		}
	}
	enosys := false
	for _, s := range sc.Syscalls {
		enosys = enosys || (slices.Contains(s.Names, "clone3") && s.Action == specs.ActErrno && *s.ErrnoRet == 38)
	}
	if !enosys {
		t.Error("clone3 does not answer ENOSYS")
	}
	if len(sc.Architectures) == 0 {
		t.Skip("no architectures for this GOARCH")
	}
}

// TestJoinUserNS: a spec joining a user namespace made beforehand keeps its mappings and other
// namespaces, and hands back the host-owned network namespace runc could not join from inside
// it (a fresh one, without a path, stays for runc to make).
func TestJoinUserNS(t *testing.T) {
	r := testRuntime(Host{CgroupNS: true, NoFile: 1024})
	idm := idmap.Map{Base: 1 << 20, Size: 1 << 16}
	for _, tc := range []struct {
		netns, wantOut string
	}{
		{"/var/run/netns/hutch-x", "/var/run/netns/hutch-x"},
		{"", ""},
	} {
		spec, err := r.Build(runtime.Spec{ID: "x", RootFS: "/r", Args: []string{"sh"}, NetNSPath: tc.netns, IDMap: idm})
		if err != nil {
			t.Fatal(err)
		}
		out, err := JoinUserNS(spec, "/proc/1/fd/7")
		if err != nil || out != tc.wantOut {
			t.Errorf("netns %q: JoinUserNS = %q, %v; want %q", tc.netns, out, err, tc.wantOut)
		}
		got := map[specs.LinuxNamespaceType]string{}
		for _, ns := range spec.Linux.Namespaces {
			got[ns.Type] = ns.Path
		}
		if p, ok := got[specs.UserNamespace]; !ok || p != "/proc/1/fd/7" {
			t.Errorf("netns %q: user namespace %q (%v)", tc.netns, p, ok)
		}
		if p, ok := got[specs.NetworkNamespace]; ok != (tc.netns == "") || p != "" {
			t.Errorf("netns %q: network namespace left %q (%v)", tc.netns, p, ok)
		}
		for _, typ := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.MountNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.CgroupNamespace} {
			if _, ok := got[typ]; !ok {
				t.Errorf("netns %q: %s namespace dropped", tc.netns, typ)
			}
		}
		if len(spec.Linux.UIDMappings) != 1 || spec.Linux.UIDMappings[0].HostID != idm.Base {
			t.Errorf("netns %q: uid mappings %+v", tc.netns, spec.Linux.UIDMappings)
		}
	}
	spec, _ := r.Build(runtime.Spec{ID: "x", RootFS: "/r", Args: []string{"sh"}})
	if _, err := JoinUserNS(spec, "/proc/1/fd/7"); err == nil {
		t.Error("JoinUserNS of a spec without a user namespace succeeded")
	}
}
