package runc

import (
	"fmt"
	"os/exec"
	"runtime"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/netns"
)

// launch is how a runc process is started when the container joins a user namespace of
// hutchd's (ocispec.JoinUserNS), whose owner is the sandbox's root rather than host root.
type launch struct {
	// netns is a network namespace runc starts in, for the container to stay in (runc cannot
	// join one the host owns from inside the user namespace).
	netns string
	// rlimits are set on runc itself before it runs, for the container to inherit, instead of
	// runc setting them on the container's process: that prlimit(2) needs CAP_SYS_RESOURCE in
	// the container's user namespace, which root has there through its capability in the
	// initial namespace only (the owner, host user Base, would have it by ownership), and a
	// host whose root lacks CAP_SYS_RESOURCE (some VMs and nested containers) refuses it.
	rlimits []specs.POSIXRlimit
}

var rlimitTypes = map[string]int{
	"RLIMIT_NOFILE":     unix.RLIMIT_NOFILE,
	"RLIMIT_MSGQUEUE":   unix.RLIMIT_MSGQUEUE,
	"RLIMIT_SIGPENDING": unix.RLIMIT_SIGPENDING,
	"RLIMIT_NPROC":      unix.RLIMIT_NPROC,
	"RLIMIT_MEMLOCK":    unix.RLIMIT_MEMLOCK,
	"RLIMIT_CORE":       unix.RLIMIT_CORE,
	"RLIMIT_STACK":      unix.RLIMIT_STACK,
	"RLIMIT_NICE":       unix.RLIMIT_NICE,
	"RLIMIT_RTPRIO":     unix.RLIMIT_RTPRIO,
}

// run runs cmd to its end as l says.
func (l launch) run(cmd *exec.Cmd) error {
	if l.netns == "" && len(l.rlimits) == 0 {
		return cmd.Run()
	}
	start := func() error { return l.start(cmd) }
	var err error
	if l.netns != "" {
		// A child inherits the namespaces of the thread that forks it.
		err = netns.Do(l.netns, start)
	} else {
		runtime.LockOSThread()
		err = start()
		runtime.UnlockOSThread()
	}
	if err != nil {
		return err
	}
	return cmd.Wait()
}

// start starts cmd on the current (locked) thread. With rlimits, runc starts traced, stopped
// at its execve before it runs any code; its limits are set, then it is let go.
func (l launch) start(cmd *exec.Cmd) error {
	if len(l.rlimits) == 0 {
		return cmd.Start()
	}
	for _, rl := range l.rlimits {
		if _, ok := rlimitTypes[rl.Type]; !ok {
			return fmt.Errorf("runc: unknown rlimit %s", rl.Type)
		}
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Ptrace = true
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	fail := func(err error) error {
		_ = cmd.Process.Kill()
		_ = unix.PtraceDetach(pid)
		_ = cmd.Wait()
		return err
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
		return fail(fmt.Errorf("runc: wait for start: %w", err))
	}
	if !ws.Stopped() {
		return fail(fmt.Errorf("runc: did not stop at its start (status %v)", ws))
	}
	for _, rl := range l.rlimits {
		lim := unix.Rlimit{Cur: rl.Soft, Max: rl.Hard}
		if err := unix.Prlimit(pid, rlimitTypes[rl.Type], &lim, nil); err != nil {
			return fail(fmt.Errorf("runc: set %s of runc: %w", rl.Type, err))
		}
	}
	if err := unix.PtraceDetach(pid); err != nil {
		return fail(fmt.Errorf("runc: let runc go: %w", err))
	}
	return nil
}
