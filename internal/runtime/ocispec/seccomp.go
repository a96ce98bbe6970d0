package ocispec

import (
	goruntime "runtime"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Seccomp design: an ALLOW-list in the spirit of Docker's default profile. Every system call
// not listed fails with EPERM; a call newer than every call the profile names fails with ENOSYS
// instead (runc adds that stub to the filter), so that libcs and runtimes that probe a new call
// (clone3, fchmodat2, …) take their fallback path.
//
// What differs from Docker's profile, and why:
//   - No capability-dependent entries: the capability set is fixed (Capabilities), so the calls
//     Docker opens for CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_SYS_MODULE, … are simply absent.
//   - Also absent although Docker allows them: io_uring_* (a long record of kernel exploits;
//     libuv and others fall back to epoll on EPERM), ptrace, process_vm_readv/writev and kcmp
//     (debugging inside the sandbox is given up so that no tracing interface is reachable at
//     all), name_to_handle_at, clock_adjtime, fanotify_mark.
//   - clone3 answers ENOSYS (its flags live in memory, which seccomp cannot inspect; glibc then
//     uses clone), and clone with any namespace flag answers EPERM: no user, mount, network, …
//     namespace can be made inside. unshare and setns are not listed.
//   - personality is allowed only with the values Docker allows (see allowedPersonalities).
//   - socket is allowed for the families a userland needs only: AF_UNIX, AF_INET, AF_INET6 and
//     AF_NETLINK (getaddrinfo and getifaddrs). AF_PACKET, AF_VSOCK, AF_ALG, Bluetooth, … fail
//     with EPERM (raw and packet sockets would also need CAP_NET_RAW, which is not granted).
//     socketcall (the 32-bit x86 multiplexer that would bypass the family check) is absent.
//
// Names unknown to the libseccomp runc was built with, or to an architecture, are skipped by
// runc, so the list may name calls newer than the kernel.

// allowedSyscalls may be called with any arguments.
var allowedSyscalls = []string{
	// Files and directories.
	"access", "chdir", "chmod", "chown", "chown32", "chroot", "close", "close_range", "copy_file_range",
	"creat", "dup", "dup2", "dup3", "faccessat", "faccessat2", "fadvise64", "fadvise64_64",
	"fallocate", "fchdir", "fchmod", "fchmodat", "fchmodat2", "fchown", "fchown32", "fchownat",
	"fcntl", "fcntl64", "fdatasync", "fgetxattr", "flistxattr", "flock", "fremovexattr",
	"fsetxattr", "fstat", "fstat64", "fstatat64", "fstatfs", "fstatfs64", "fsync", "ftruncate",
	"ftruncate64", "futimesat", "getcwd", "getdents", "getdents64", "getxattr", "lchown",
	"lchown32", "lgetxattr", "link", "linkat", "listxattr", "llistxattr", "_llseek",
	"lremovexattr", "lseek", "lsetxattr", "lstat", "lstat64", "mkdir", "mkdirat", "mknod",
	"mknodat", "newfstatat", "open", "openat", "openat2", "pread64", "preadv", "preadv2",
	"pwrite64", "pwritev", "pwritev2", "read", "readahead", "readlink", "readlinkat", "readv",
	"removexattr", "rename", "renameat", "renameat2", "rmdir", "sendfile", "sendfile64",
	"setxattr", "splice", "stat", "stat64", "statfs", "statfs64", "statx", "symlink", "symlinkat",
	"sync", "sync_file_range", "syncfs", "tee", "truncate", "truncate64", "umask", "unlink",
	"unlinkat", "utime", "utimensat", "utimensat_time64", "utimes", "vmsplice", "write", "writev",
	"cachestat",
	// Polling, events, timers, async I/O (not io_uring).
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait", "epoll_pwait2",
	"epoll_wait", "epoll_wait_old", "eventfd", "eventfd2", "inotify_add_watch", "inotify_init",
	"inotify_init1", "inotify_rm_watch", "io_cancel", "io_destroy", "io_getevents",
	"io_pgetevents", "io_pgetevents_time64", "io_setup", "io_submit", "ioctl", "_newselect",
	"pause", "pipe", "pipe2", "poll", "ppoll", "ppoll_time64", "pselect6", "pselect6_time64", "select",
	"signalfd", "signalfd4", "timer_create", "timer_delete", "timer_getoverrun", "timer_gettime",
	"timer_gettime64", "timer_settime", "timer_settime64", "timerfd_create", "timerfd_gettime",
	"timerfd_gettime64", "timerfd_settime", "timerfd_settime64",
	// Time (reading only; setting needs CAP_SYS_TIME, which is not granted).
	"adjtimex", "alarm", "clock_getres", "clock_getres_time64", "clock_gettime",
	"clock_gettime64", "clock_nanosleep", "clock_nanosleep_time64", "getitimer", "gettimeofday",
	"nanosleep", "setitimer", "time", "times",
	// Processes, threads, signals, scheduling.
	"capget", "capset", "execve", "execveat", "exit", "exit_group", "fork", "vfork", "futex",
	"futex_time64", "futex_waitv", "futex_wait", "futex_wake", "futex_requeue", "getcpu",
	"getegid", "getegid32", "geteuid", "geteuid32", "getgid", "getgid32", "getgroups",
	"getgroups32", "getpgid", "getpgrp", "getpid", "getppid", "getpriority", "getresgid",
	"getresgid32", "getresuid", "getresuid32", "getrlimit", "get_robust_list", "getrusage",
	"getsid", "get_thread_area", "gettid", "getuid", "getuid32", "ioprio_get", "ioprio_set",
	"kill", "membarrier", "pidfd_open", "pidfd_send_signal", "prctl", "prlimit64",
	"process_mrelease", "restart_syscall", "rseq", "rt_sigaction", "rt_sigpending",
	"rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
	"rt_sigtimedwait_time64", "rt_tgsigqueueinfo", "sched_getaffinity", "sched_getattr",
	"sched_getparam", "sched_get_priority_max", "sched_get_priority_min", "sched_getscheduler",
	"sched_rr_get_interval", "sched_rr_get_interval_time64", "sched_setaffinity",
	"sched_setattr", "sched_setparam", "sched_setscheduler", "sched_yield", "seccomp",
	"setfsgid", "setfsgid32", "setfsuid", "setfsuid32", "setgid", "setgid32", "setgroups",
	"setgroups32", "setpgid", "setpriority", "setregid", "setregid32", "setresgid",
	"setresgid32", "setresuid", "setresuid32", "setreuid", "setreuid32", "setrlimit",
	"set_robust_list", "setsid", "set_thread_area", "set_tid_address", "setuid", "setuid32",
	"sigaltstack", "sigprocmask", "sigreturn", "tgkill", "tkill", "ugetrlimit", "uname",
	"wait4", "waitid", "waitpid", "sysinfo", "getrandom", "landlock_add_rule",
	"landlock_create_ruleset", "landlock_restrict_self",
	// Memory.
	"brk", "madvise", "map_shadow_stack", "memfd_create", "memfd_secret", "mincore", "mlock",
	"mlock2", "mlockall", "mmap", "mmap2", "mprotect", "mremap", "mseal", "msync", "munlock",
	"munlockall", "munmap", "pkey_alloc", "pkey_free", "pkey_mprotect", "remap_file_pages",
	// IPC (the sandbox's own IPC namespace).
	"ipc", "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive", "mq_timedreceive_time64",
	"mq_timedsend", "mq_timedsend_time64", "mq_unlink", "msgctl", "msgget", "msgrcv", "msgsnd",
	"semctl", "semget", "semop", "semtimedop", "semtimedop_time64", "shmat", "shmctl", "shmdt",
	"shmget",
	// Sockets (socket itself is filtered by family, below).
	"accept", "accept4", "bind", "connect", "getpeername", "getsockname", "getsockopt", "listen",
	"recv", "recvfrom", "recvmmsg", "recvmmsg_time64", "recvmsg", "send", "sendmmsg", "sendmsg",
	"sendto", "setsockopt", "shutdown", "socketpair",
}

// archSyscalls are allowed on one architecture family only.
var archSyscalls = map[string][]string{
	"amd64": {"arch_prctl", "modify_ldt"},
	"386":   {"modify_ldt"},
	"arm64": {"arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2", "breakpoint", "cacheflush", "set_tls"},
	"arm":   {"arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2", "breakpoint", "cacheflush", "set_tls"},
}

// socketFamilies are the address families socket(2) accepts.
var socketFamilies = []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

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

// AllowedSyscalls returns the names DefaultSeccomp allows unconditionally on this architecture,
// sorted (clone, socket and personality are allowed with argument filters on top).
func AllowedSyscalls() []string {
	out := append(append([]string{}, allowedSyscalls...), archSyscalls[goruntime.GOARCH]...)
	slices.Sort(out)
	return slices.Compact(out)
}

// DefaultSeccomp returns the seccomp profile of every container (see the design note above).
func DefaultSeccomp() *specs.LinuxSeccomp {
	eperm, enosys := uint(unix.EPERM), uint(unix.ENOSYS)
	sc := &specs.LinuxSeccomp{
		DefaultAction:   specs.ActErrno,
		DefaultErrnoRet: &eperm,
		Architectures:   architectures(),
		Syscalls: []specs.LinuxSyscall{
			{Names: AllowedSyscalls(), Action: specs.ActAllow},
			{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
		},
	}
	// clone: allowed when none of the namespace flags is set (one masked comparison: runc ORs
	// several comparisons on the same argument, so every "one of" below is one rule per value).
	clone := specs.LinuxSyscall{Names: []string{"clone"}, Action: specs.ActAllow}
	var mask uint64
	for _, flag := range namespaceCloneFlags {
		mask |= flag
	}
	clone.Args = []specs.LinuxSeccompArg{{Index: cloneFlagsArg(), Value: mask, ValueTwo: 0, Op: specs.OpMaskedEqual}}
	sc.Syscalls = append(sc.Syscalls, clone)
	// socket: one rule per allowed family.
	for _, fam := range socketFamilies {
		sc.Syscalls = append(sc.Syscalls, specs.LinuxSyscall{
			Names: []string{"socket"}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: fam, Op: specs.OpEqualTo}},
		})
	}
	// personality: one rule per allowed value (rules are ORed).
	for _, v := range allowedPersonalities {
		sc.Syscalls = append(sc.Syscalls, specs.LinuxSyscall{
			Names: []string{"personality"}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: v, Op: specs.OpEqualTo}},
		})
	}
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
