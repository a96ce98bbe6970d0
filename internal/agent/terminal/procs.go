package terminal

import (
	"bytes"
	"os"
	"strconv"
)

// procStat is what a terminal kill needs of one process from /proc/<pid>/stat.
type procStat struct {
	pid, ppid, sid int
}

// scanProcs reads every live (not zombie) process.
func scanProcs() []procStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]procStat, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 4 || string(f[0]) == "Z" || string(f[0]) == "X" {
			continue
		}
		ppid, err1 := strconv.Atoi(string(f[1]))
		sid, err2 := strconv.Atoi(string(f[3]))
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, procStat{pid: pid, ppid: ppid, sid: sid})
	}
	return out
}

// treeOf returns the live processes that belong to the terminal whose first process (the
// session leader: the shim or the shell) is root: the members of its session (the shell, its
// jobs) and every descendant of root (under the shim, a child subreaper, that includes
// processes that left the session with setsid). root itself is included while it lives.
func treeOf(root int) []int {
	ps := scanProcs()
	children := map[int][]int{}
	in := map[int]bool{}
	for _, p := range ps {
		children[p.ppid] = append(children[p.ppid], p.pid)
		if p.sid == root || p.pid == root {
			in[p.pid] = true
		}
	}
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			in[c] = true
			queue = append(queue, c)
		}
	}
	self := os.Getpid()
	out := make([]int, 0, len(in))
	for pid := range in {
		if pid != self && pid > 1 {
			out = append(out, pid)
		}
	}
	return out
}
