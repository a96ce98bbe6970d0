package reaper

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// CommandNice is the nice value of every command, CommandOOMScoreAdj its oom_score_adj.
const (
	CommandNice        = 19
	CommandOOMScoreAdj = "500"
)

// StatusFDEnv names the environment variable that gives the shim a start-status fd (a pipe's
// write end). When it is set, the shim writes ShimStarted there once the command is running,
// or ShimFailed and a one-line reason when it cannot start it, and closes the fd; EOF without
// either means the shim itself died before starting the command (a Go runtime that could not
// make a thread under pid pressure, say). The variable is not passed on to the command.
const StatusFDEnv = "HUTCH_SHIM_STATUS_FD"

// The first byte written to the start-status fd.
const (
	ShimStarted = '+'
	ShimFailed  = '-'
)

// shimSignals are the termination signals the shim catches and drops. Its lifetime is its
// child's: it exits (with the child's status) once the child has, so a SIGTERM meant for the
// command's tree never ends the shim first, which would report the command ended while it
// still runs. Caught (not ignored) signals are reset to the default in the child by exec.
var shimSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}

// Shim runs argv as its child and waits for it, as a child subreaper (PR_SET_CHILD_SUBREAPER):
// a process of the child's tree whose parent dies is reparented to the shim rather than to
// PID 1, even after setsid, a double fork or a cleared environment. So, while the command runs,
// its whole tree is the shim's descendants, and the agent can kill all of it by walking them.
// The child gets fds 0–2 and the next extraFDs fds (3, 4, …) of the shim, which then lets go of
// its own copies so it holds no pipe of the command open. Shim returns the child's exit code
// (128+N when killed by signal N), as soon as the child exits; leftover background processes
// of the command then move on to the next subreaper, as any orphan does. It returns 125 when
// it cannot start the child, and reports start success or failure on the fd named by
// StatusFDEnv when that is set. SIGTERM, SIGINT and SIGHUP do not end the shim (see
// shimSignals); SIGKILL does.
func Shim(argv []string, extraFDs int) int {
	for _, sig := range shimSignals {
		if !signal.Ignored(sig) { // an ignored signal stays ignored, for the child too
			signal.Notify(make(chan os.Signal, 1), sig)
		}
	}
	status := statusFD(extraFDs)
	fail := func(format string, args ...any) int {
		msg := fmt.Sprintf(format, args...)
		fmt.Fprintln(os.Stderr, "hutch-init shim:", msg)
		if status != nil {
			_, _ = status.Write(append([]byte{ShimFailed}, strings.ReplaceAll(msg, "\n", " ")...))
			status.Close()
		}
		return 125
	}
	if len(argv) == 0 {
		return fail("no command")
	}
	// gVisor (runsc 20221219) lets only PID 1 be a subreaper and says EINVAL to others, which
	// Linux never does: there the shim is a plain parent, and orphans of the command's tree go
	// to hutch-init (PID 1), which reaps them; killing the command still reaches its process
	// group and the descendants that stay below the shim.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fail("subreaper: %v", err)
	}
	// The agent shares the sandbox's CPU quota and memory limit with the commands. Commands
	// yield to it: a lower CPU priority (nice only orders processes inside this sandbox, whose
	// cgroup keeps it from others; without CAP_SYS_NICE a command cannot raise it back), so a
	// fork bomb cannot starve the agent that must kill it; and a higher OOM score, so the
	// kernel picks a command, not the agent, when memory runs out. Both are inherited.
	// Linux keeps the nice value per thread and a fork copies the forking thread's, so the
	// goroutine stays on the thread it demoted until ForkExec: unlocked, the runtime moved it
	// to another thread, at nice 0, in 3 of 500 starts on a loaded host, and that
	// command's whole tree could then starve the agent.
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, 0, CommandNice)
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte(CommandOOMScoreAdj), 0)
	files := []uintptr{0, 1, 2}
	for fd := 3; fd < 3+extraFDs; fd++ {
		files = append(files, uintptr(fd))
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, StatusFDEnv+"=") })
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Env: env, Files: files})
	if err != nil {
		return fail("start %s: %v", argv[0], err)
	}
	if status != nil {
		_, _ = status.Write([]byte{ShimStarted})
		status.Close()
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

// statusFD returns the start-status fd named by StatusFDEnv (close-on-exec from now on), or
// nil when there is none or it names a fd passed on to the child (0–2, the extra fds).
func statusFD(extraFDs int) *os.File {
	fd, err := strconv.Atoi(os.Getenv(StatusFDEnv))
	if err != nil || fd < 3+extraFDs {
		return nil
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), "shim-status")
}
