package ocispec

import (
	"errors"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime"
)

func testRuntime(h Host) Builder { return Builder{Host: h, CgroupParent: "hutch"} }

func TestBuildSpec(t *testing.T) {
	r := testRuntime(Host{MemSwap: true, CgroupNS: true, IPv6: true, NoFile: 4096})
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
	if rl := spec.Process.Rlimits; len(rl) != 1 || rl[0].Hard != 4096 || rl[0].Soft != 4096 {
		t.Errorf("rlimits = %+v", rl)
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
	if *res.CPU.Quota != 25000 || *res.CPU.Period != 100000 {
		t.Errorf("cpu = %d/%d", *res.CPU.Quota, *res.CPU.Period)
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
	if spec.Linux.Seccomp == nil || spec.Linux.Seccomp.DefaultAction != specs.ActAllow {
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
	var denied []string
	for _, s := range sc.Syscalls {
		if len(s.Args) == 0 && *s.ErrnoRet == 1 {
			denied = append(denied, s.Names...)
		}
	}
	for _, name := range []string{"mount", "unshare", "setns", "bpf", "io_uring_setup", "keyctl", "ptrace", "userfaultfd", "kexec_load", "init_module", "open_by_handle_at", "perf_event_open"} {
		if !slices.Contains(denied, name) {
			t.Errorf("%s not denied", name)
		}
	}
	for _, name := range []string{"clone", "execve", "read", "openat", "socket", "personality"} {
		if slices.Contains(denied, name) {
			t.Errorf("%s denied unconditionally", name)
		}
	}
	if len(sc.Architectures) == 0 {
		t.Skip("no architectures for this GOARCH")
	}
}
