package session

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// killTree kills a command's whole tree. root is the process the agent started (the shim, a
// child subreaper, or bash itself) and the leader of its process group.
//
//  1. Every descendant of root is SIGSTOPped, pass after pass, until none is left running: a
//     stopped process cannot fork, so even a fork bomb stops growing, and the CPU it used
//     (shared with this agent under the sandbox's quota) comes back.
//  2. Every descendant is SIGKILLed, repeatedly, until none is left. Under the shim, processes
//     whose parent dies are reparented to it, so setsid, double forks and a cleared
//     environment do not take a process out of this walk.
//  3. root's group, then every process whose environment still carries MarkerEnv=execID.
//
// It gives up after killBudget and returns the number of processes found on the last pass
// (0 on success).
func killTree(root int, execID string) int {
	deadline := time.Now().Add(killBudget)
	if root > 0 {
		for time.Now().Before(deadline) {
			running := 0
			for _, p := range descendants(root) {
				if !p.stopped {
					running++
					_ = unix.Kill(p.pid, unix.SIGSTOP)
				}
			}
			if running == 0 {
				break
			}
		}
		for time.Now().Before(deadline) {
			ds := descendants(root)
			if len(ds) == 0 {
				break
			}
			for _, p := range ds {
				_ = unix.Kill(p.pid, unix.SIGKILL)
			}
			time.Sleep(time.Millisecond)
		}
		_ = unix.Kill(-root, unix.SIGKILL)
	}
	needle := []byte(MarkerEnv + "=" + execID + "\x00")
	for {
		left := sweepMarked(needle)
		if left == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
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

// killBudget bounds one tree kill; a sandbox starved by its own processes makes /proc walks
// slow.
const killBudget = 60 * time.Second

// proc is a process found below a tree's root.
type proc struct {
	pid     int
	stopped bool
}

// ProcStat is one live process as /proc/<pid>/stat describes it.
type ProcStat struct {
	Pid, Ppid, Sid int
	State          byte // 'R', 'S', 'D', 'T', 't', …; never 'Z' or 'X' (those are left out)
}

// ScanProcs reads every live (not zombie) process from /proc/<pid>/stat. A process that ends
// during the scan is left out.
func ScanProcs() []ProcStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]ProcStat, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session …; comm may hold spaces and parentheses: parse
		// after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 4 || len(f[0]) != 1 || f[0][0] == 'Z' || f[0][0] == 'X' {
			continue
		}
		ppid, err1 := strconv.Atoi(string(f[1]))
		sid, err2 := strconv.Atoi(string(f[3]))
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, ProcStat{Pid: pid, Ppid: ppid, Sid: sid, State: f[0][0]})
	}
	return out
}

// descendants returns the live (not zombie) processes below root, from the parent links in
// /proc/<pid>/stat.
func descendants(root int) []proc {
	children := map[int][]proc{}
	for _, p := range ScanProcs() {
		children[p.Ppid] = append(children[p.Ppid], proc{pid: p.Pid, stopped: p.State == 'T' || p.State == 't'})
	}
	var out []proc
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}
