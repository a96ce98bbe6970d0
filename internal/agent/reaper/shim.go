package reaper

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// CommandNice is the nice value of every command, CommandOOMScoreAdj its oom_score_adj.
const (
	CommandNice        = 19
	CommandOOMScoreAdj = "500"
)

// Shim runs argv as its child and waits for it, as a child subreaper (PR_SET_CHILD_SUBREAPER):
// a process of the child's tree whose parent dies is reparented to the shim rather than to
// PID 1, even after setsid, a double fork or a cleared environment. So, while the command runs,
// its whole tree is the shim's descendants, and the agent can kill all of it by walking them.
// The child gets fds 0–2 and the next extraFDs fds (3, 4, …) of the shim, which then lets go of
// its own copies so it holds no pipe of the command open. Shim returns the child's exit code
// (128+N when killed by signal N), as soon as the child exits; leftover background processes
// of the command then move on to the next subreaper, as any orphan does.
func Shim(argv []string, extraFDs int) int {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "hutch-init shim: no command")
		return 125
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "hutch-init shim: subreaper:", err)
		return 125
	}
	// The agent shares the sandbox's CPU quota and memory limit with the commands. Commands
	// yield to it: a lower CPU priority (nice only orders processes inside this sandbox, whose
	// cgroup keeps it from others; without CAP_SYS_NICE a command cannot raise it back), so a
	// fork bomb cannot starve the agent that must kill it; and a higher OOM score, so the
	// kernel picks a command, not the agent, when memory runs out. Both are inherited.
	_ = unix.Setpriority(unix.PRIO_PROCESS, 0, CommandNice)
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte(CommandOOMScoreAdj), 0)
	files := []uintptr{0, 1, 2}
	for fd := 3; fd < 3+extraFDs; fd++ {
		files = append(files, uintptr(fd))
	}
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Env: os.Environ(), Files: files})
	if err != nil {
		fmt.Fprintf(os.Stderr, "hutch-init shim: start %s: %v\n", argv[0], err)
		return 125
	}
	if null, err := unix.Open(os.DevNull, unix.O_RDWR, 0); err == nil {
		for fd := 0; fd < 3; fd++ {
			_ = unix.Dup2(null, fd)
		}
		_ = unix.Close(null)
	}
	for fd := 3; fd < 3+extraFDs; fd++ {
		_ = unix.Close(fd)
	}
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 125
		}
		if wpid == pid {
			return exitCode(ws)
		}
	}
}
