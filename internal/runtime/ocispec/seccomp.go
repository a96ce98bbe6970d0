package ocispec

import (
	goruntime "runtime"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Seccomp design: default ALLOW with an explicit deny list, not Docker's allowlist.
//
// Why: capabilities are the main barrier (no CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_SYS_MODULE,
// CAP_SYS_TIME, …), and the deny list takes away the kernel surface an unprivileged process can
// still reach and that has a history of exploits (io_uring, bpf, userfaultfd, keyrings, user
// namespaces, perf, new mount API, ptrace). A deny list never breaks a userland that uses a
// syscall newer than the list (glibc, Node's libuv and Python pick up new syscalls over time),
// and it is short enough to review. The cost is that a new dangerous syscall is allowed until it
// is added here.
//
// Denied calls fail with EPERM, except clone3 which fails with ENOSYS so that glibc falls back to
// clone (whose flags, unlike clone3's, seccomp can inspect). clone with any namespace flag is
// denied, so no user, mount, network, … namespace can be created inside (unshare and setns are
// denied outright). personality is allowed only with the values Docker allows.

// deniedSyscalls fail with EPERM. Names unknown on an architecture are ignored by runc.
var deniedSyscalls = []string{
	"_sysctl",
	"acct",
	"add_key",
	"bpf",
	"clock_adjtime",
	"clock_adjtime64",
	"clock_settime",
	"clock_settime64",
	"create_module",
	"delete_module",
	"fanotify_init",
	"finit_module",
	"fsconfig",
	"fsmount",
	"fsopen",
	"fspick",
	"get_kernel_syms",
	"get_mempolicy",
	"init_module",
	"io_uring_enter",
	"io_uring_register",
	"io_uring_setup",
	"ioperm",
	"iopl",
	"kcmp",
	"kexec_file_load",
	"kexec_load",
	"keyctl",
	"lookup_dcookie",
	"mbind",
	"mount",
	"mount_setattr",
	"move_mount",
	"move_pages",
	"name_to_handle_at",
	"nfsservctl",
	"open_by_handle_at",
	"open_tree",
	"perf_event_open",
	"pivot_root",
	"process_vm_readv",
	"process_vm_writev",
	"ptrace",
	"query_module",
	"quotactl",
	"quotactl_fd",
	"reboot",
	"request_key",
	"set_mempolicy",
	"set_mempolicy_home_node",
	"setns",
	"settimeofday",
	"stime",
	"swapoff",
	"swapon",
	"syslog",
	"sysfs",
	"umount",
	"umount2",
	"unshare",
	"uselib",
	"userfaultfd",
	"ustat",
	"vhangup",
	"vm86",
	"vm86old",
}

// namespaceCloneFlags are the clone(2) flags that create namespaces.
var namespaceCloneFlags = []uint64{
	unix.CLONE_NEWNS,
	unix.CLONE_NEWCGROUP,
	unix.CLONE_NEWUTS,
	unix.CLONE_NEWIPC,
	unix.CLONE_NEWUSER,
	unix.CLONE_NEWPID,
	unix.CLONE_NEWNET,
}

// allowedPersonalities are the personality(2) arguments Docker's profile allows: PER_LINUX,
// PER_LINUX32, UNAME26, UNAME26|PER_LINUX32 and the query value 0xffffffff.
var allowedPersonalities = []uint64{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// DefaultSeccomp returns the seccomp profile of every container (see the design note above).
func DefaultSeccomp() *specs.LinuxSeccomp {
	eperm, enosys := uint(unix.EPERM), uint(unix.ENOSYS)
	sc := &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: architectures(),
		Syscalls: []specs.LinuxSyscall{
			{Names: append([]string{}, deniedSyscalls...), Action: specs.ActErrno, ErrnoRet: &eperm},
			{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
		},
	}
	for _, flag := range namespaceCloneFlags {
		sc.Syscalls = append(sc.Syscalls, specs.LinuxSyscall{
			Names: []string{"clone"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: cloneFlagsArg(), Value: flag, ValueTwo: flag, Op: specs.OpMaskedEqual}},
		})
	}
	personality := specs.LinuxSyscall{Names: []string{"personality"}, Action: specs.ActErrno, ErrnoRet: &eperm}
	for _, v := range allowedPersonalities {
		personality.Args = append(personality.Args, specs.LinuxSeccompArg{Index: 0, Value: v, Op: specs.OpNotEqual})
	}
	sc.Syscalls = append(sc.Syscalls, personality)
	return sc
}

// cloneFlagsArg is the index of clone's flags argument (the second on s390x, else the first).
func cloneFlagsArg() uint {
	if goruntime.GOARCH == "s390x" {
		return 1
	}
	return 0
}

func architectures() []specs.Arch {
	switch goruntime.GOARCH {
	case "amd64", "386":
		return []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32}
	case "arm64", "arm":
		return []specs.Arch{specs.ArchAARCH64, specs.ArchARM}
	default:
		return nil // native architecture only
	}
}
