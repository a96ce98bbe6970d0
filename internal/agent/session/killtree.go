package session

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// killTree SIGKILLs process group pgid and then every process whose environment carries
// MarkerEnv=execID, repeating the /proc sweep until none is left alive (at most ~2 s). It
// returns the number of marked processes found on the last sweep (0 on success).
func killTree(pgid int, execID string) int {
	if pgid > 0 {
		_ = unix.Kill(-pgid, unix.SIGKILL)
	}
	needle := []byte(MarkerEnv + "=" + execID + "\x00")
	left := 0
	for range 200 {
		left = sweepMarked(needle)
		if left == 0 {
			return 0
		}
		time.Sleep(10 * time.Millisecond)
	}
	return left
}

// FindMarked returns the PIDs of live processes whose environment holds key=value. It is
// meant for tests and diagnostics.
func FindMarked(key, value string) []int {
	var pids []int
	forEachMarked([]byte(key+"="+value+"\x00"), func(pid int) { pids = append(pids, pid) })
	return pids
}

// sweepMarked SIGKILLs every live process whose environ contains needle and returns how many
// it found.
func sweepMarked(needle []byte) int {
	n := 0
	forEachMarked(needle, func(pid int) {
		n++
		_ = unix.Kill(pid, unix.SIGKILL)
	})
	return n
}

// forEachMarked calls fn for every process (other than this one) whose environ contains
// needle ("KEY=value\x00") as a whole record. Zombies have an empty environ and never match.
func forEachMarked(needle []byte, fn func(pid int)) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || len(env) == 0 {
			continue
		}
		if !bytes.HasSuffix(env, []byte{0}) {
			env = append(env, 0)
		}
		if bytes.HasPrefix(env, needle) || bytes.Contains(env, append([]byte{0}, needle...)) {
			fn(pid)
		}
	}
}
