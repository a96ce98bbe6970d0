package terminal

import (
	"os"

	"github.com/hutchdev/hutch/internal/agent/session"
)

// treeOf returns the live processes that belong to the terminal whose first process (the
// session leader: the shim or the shell) is root: the members of its session (the shell, its
// jobs) and every descendant of root (under the shim, a child subreaper, that includes
// processes that left the session with setsid). root itself is included while it lives.
func treeOf(root int) []int {
	children := map[int][]int{}
	in := map[int]bool{}
	for _, p := range session.ScanProcs() {
		children[p.Ppid] = append(children[p.Ppid], p.Pid)
		if p.Sid == root || p.Pid == root {
			in[p.Pid] = true
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
