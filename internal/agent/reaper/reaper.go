// Package reaper is hutch-init's PID 1 role: it starts the real agent as a child process,
// forwards termination signals to it, and reaps every orphan that the kernel re-parents to
// PID 1, so no zombie accumulates in the sandbox. Keeping the reaper in a separate process
// from the server avoids racing os/exec's Wait with a global wait4(-1).
package reaper

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwarded are the signals PID 1 passes on to the child.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT}

// Supervise starts argv[0] with argv and env as a child, forwards SIGTERM, SIGINT, SIGHUP and
// SIGQUIT to it, and reaps every child (the server and any orphan) until the server exits.
// It returns the server's exit code (128+N when killed by signal N). It never calls os/exec's
// Wait, so it must be the only reaper of this process. extraFiles are passed to the child as
// fds 3, 4, … and closed in this process once the child runs.
func Supervise(argv, env []string, extraFiles []uintptr, log *slog.Logger) (int, error) {
	if len(argv) == 0 {
		return 1, errors.New("reaper: empty argv")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{
		Env:   env,
		Files: append([]uintptr{0, 1, 2}, extraFiles...),
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return 1, fmt.Errorf("reaper: start %s: %w", argv[0], err)
	}
	log.Info("agent started", "pid", pid)
	// The child has its own copies now. Closing ours means a listening socket handed over this
	// way dies with the server, so hutchd sees "connection refused" instead of a hang.
	for _, fd := range extraFiles {
		syscall.Close(int(fd))
	}

	done := make(chan int, 1)
	go func() {
		// Exits when the server child has been reaped.
		for {
			var ws unix.WaitStatus
			wpid, err := unix.Wait4(-1, &ws, 0, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				// ECHILD: nothing left to wait for, the server included.
				done <- 1
				return
			}
			if wpid == pid {
				done <- exitCode(ws)
				return
			}
		}
	}()
	for {
		select {
		case sig := <-sigs:
			log.Info("forwarding signal", "signal", sig.String())
			_ = syscall.Kill(pid, sig.(syscall.Signal))
		case code := <-done:
			log.Info("agent exited", "code", code)
			return code, nil
		}
	}
}

func exitCode(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
