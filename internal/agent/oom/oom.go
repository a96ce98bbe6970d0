// Package oom tells whether a process the agent ran inside its sandbox was killed by the
// kernel's OOM killer, from the sandbox's own memory cgroup: the "oom_kill" counter of
// memory.events (cgroup v2) or memory.oom_control (cgroup v1), both visible read-only in the
// sandbox's cgroup namespace at /sys/fs/cgroup.
//
// Attribution: a process is reported OOM-killed when it died of SIGKILL (exit code 137) and the
// counter rose while it ran. When two processes die of SIGKILL at once, one by the OOM killer
// and one by another sender, both are reported OOM-killed: the counter does not say which
// process it killed. Where neither file is readable nothing is reported.
//
// Where the sandbox's kernel does not enforce the memory limit (gVisor), the agent does
// (Enforcer), and so does hutchd's memory guard from the host, which writes the time of its
// last kill and that kill's cause in files the sandbox sees read-only (GuardKillFile,
// GuardCauseFile); both count like the kernel's kills. A guard kill for another cause than
// memory has its own reason: ReasonProcessLimit (a sandbox near its process limit, a fork bomb
// of small processes) or ReasonCPUStarved (busy processes kept the agent from running), unless
// the OOM counter rose too.
package oom

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Reason is the value of the "reason" field of an exec result or process record whose process
// the OOM killer ended; ReasonProcessLimit and ReasonCPUStarved those of processes hutchd's
// memory guard killed for its causes "processes" and "starved" (internal/runtime/runsc).
const (
	Reason             = "oom-killed"
	ReasonProcessLimit = "process-limit"
	ReasonCPUStarved   = "cpu-starved"
)

// exitSIGKILL is the shell's exit code for death by SIGKILL.
const exitSIGKILL = 128 + 9

// counterFiles are where the counter lives, relative to the cgroup mount, newest layout first.
var counterFiles = []string{"memory.events", "memory/memory.oom_control"}

// GuardKillFile is where hutchd's memory guard of a gVisor sandbox writes the time of its last
// kill (Unix nanoseconds, "0" for none), before the kill; GuardKilledFile the processes that
// kill signals (PID:PGID pairs separated by spaces);
// GuardPressureFile says "1" while the sandbox's memory on the host is above its limit
// (internal/runtime/runsc/guard).
const (
	GuardKillFile     = "/run/hutch-guard/last_kill"
	GuardCauseFile    = "/run/hutch-guard/last_kill_cause"
	GuardKilledFile   = "/run/hutch-guard/last_kill_processes"
	GuardPressureFile = "/run/hutch-guard/pressure"
)

// Counter reads the oom_kill counter under a cgroup mount.
type Counter struct {
	Root string // the cgroup mount, "/sys/fs/cgroup" inside a sandbox
	// Guard is the memory guard's kill file (GuardKillFile); missing or unreadable: no kill.
	Guard string
	// Enforcer, when set, is the agent's own OOM killer: its kills are added.
	Enforcer *Enforcer
}

// Default is the counter of the sandbox the agent runs in; hutch-init sets its Enforcer before
// serving when it enforces the limit itself.
var Default = Counter{Root: "/sys/fs/cgroup", Guard: GuardKillFile}

// Kills returns the number of processes the OOM killer (the kernel's and Enforcer's) has killed
// in the cgroup, and false when no counter is readable and no Enforcer is set.
func (c Counter) Kills() (int64, bool) {
	own := c.Enforcer.Kills()
	for _, name := range counterFiles {
		if n, ok := readCounter(filepath.Join(c.Root, name)); ok {
			return n + own, true
		}
	}
	return own, c.Enforcer != nil
}

// lastGuardKill returns the memory guard's last kill time (GuardKillFile), 0 when none or
// unreadable.
func (c Counter) lastGuardKill() int64 {
	if c.Guard == "" {
		return 0
	}
	n, _ := readInt(c.Guard)
	return n
}

// readInt reads a file that holds one integer.
func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

func readCounter(path string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == "oom_kill" {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// Watch is the counter at the start of a process.
type Watch struct {
	c     Counter
	start int64
	ok    bool
	guard int64 // lastGuardKill at the start
}

// Start reads the counter before a process starts.
func (c Counter) Start() Watch {
	n, ok := c.Kills()
	return Watch{c: c, start: n, ok: ok, guard: c.lastGuardKill()}
}

// Reason returns Reason when a process that ended with exitCode was OOM-killed (see the package
// comment), else "".
func (w Watch) Reason(exitCode int) string {
	if exitCode != exitSIGKILL {
		return ""
	}
	if w.ok {
		if n, ok := w.c.Kills(); ok && n > w.start {
			return Reason
		}
	}
	if w.c.lastGuardKill() > w.guard {
		return w.c.guardReason()
	}
	return ""
}

// guardReason is the reason of the guard's last kill, from its cause (GuardCauseFile, next to
// Guard): Reason for "memory" and for a cause it cannot read (a hutchd from before the file).
func (c Counter) guardReason() string {
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(c.Guard), filepath.Base(GuardCauseFile)))
	switch strings.TrimSpace(string(b)) {
	case "processes":
		return ReasonProcessLimit
	case "starved":
		return ReasonCPUStarved
	}
	return Reason
}
