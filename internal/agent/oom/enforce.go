package oom

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// Enforcer keeps the memory of a sandbox whose kernel does not enforce its limit at or under
// Limit, the way the kernel's OOM killer does on runc. gVisor's Sentry accounts the memory of
// the sandbox's processes but never kills one: the only bound is the host cgroup around the
// whole Sentry, whose OOM kill ends the sandbox with its agent. So the agent watches the
// sandbox's usage and, when it exceeds Limit, SIGKILLs the process Linux would choose
// (oom_badness in mm/oom_kill.c: resident pages plus oom_score_adj thousandths of the limit;
// but see below), never the agent itself. A kill counts in Kills, so
// Counter reports the process "oom-killed" as it does for the kernel's kills.
//
// Four departures from Linux. Because an attacker in the sandbox chooses its oom_score_adj (gVisor
// lets any process lower it, Linux only with CAP_SYS_RESOURCE, which sandboxes lack): negative
// values count as 0, and the shims the agent's server starts commands under (its children
// running Self, the agent's binary, whose Go runtime holds 20-40 MB) are never chosen; killing
// a shim frees little and ends an innocent command. The victim is chosen in the process
// group of the most badness first (see victim): a fork bomb's many small processes. And
// nothing is killed while, within memoryReturn of a kill, the excess over the limit is more
// than all the processes it may kill hold: Linux frees a killed process's memory at its exit,
// but the Sentry gives it back later (seconds after a fork bomb's kill on a loaded host), and
// meanwhile a kill would only end an innocent process.
//
// Watching is not free inside gVisor: every wake-up of the agent costs the Sentry (~1.3 ms of a
// lite sandbox's CPU, measured) and so does every read of the usage (the Sentry scans its memory
// file). With Pressure set, the enforcer reads that file every 500 ms (pressureInterval) and the
// usage only while it says "1" (hutchd's memory guard sets it while the host's count, which is
// never below the usage inside, is above Limit): every FastInterval while it grows within 1/8
// of the limit, else every SlowInterval, doubling up to 2 s while it does not grow (a sandbox
// that runs at its limit: measured 31 ms/s of a lite sandbox's CPU with reads every 100 ms).
// Without Pressure (or when its file is unreadable) the usage is read at those intervals all
// the time. A process allocating faster than the interval allows overshoots the
// limit by what it allocates in one interval: its CPU quota bounds that (a lite sandbox
// allocates ~50 MB/s under gVisor), and the runtime's host cgroup has room above the limit for
// it and for the runtime's own memory (runsc/guard.SentryMemory). Measured idle cost in a lite
// sandbox: 2 ms of CPU a second (15 ms polling every 100 ms, 30 ms reading the usage too).
type Enforcer struct {
	// Limit is the sandbox's memory limit, in bytes (> 0).
	Limit int64
	// Usage returns the sandbox's memory in use, in bytes. Default: CgroupUsage("/sys/fs/cgroup").
	Usage func() (int64, error)
	// Proc is the procfs to find processes in; default "/proc".
	Proc string
	// Server is the agent's server process, never chosen (nor is pid 1), and neither is a
	// child of Server whose /proc/PID/exe is Self (the agent's binary): the shims it starts
	// commands under (a child of Server whose exe link is refused: the shims are
	// non-dumpable). Another copy of the binary is not exempt: a command can run one, and
	// make it hold memory (process logs).
	Server int
	Self   string
	// Pressure, when set, is the file that says when to read the usage (GuardPressureFile).
	Pressure string
	// GuardKill, when set, is the file where hutchd's memory guard writes the time of its last
	// kill (GuardKillFile): the enforcer kills nothing for guardHoldoff after that time, nor
	// while a process that kill signalled (GuardKilledFile, beside it) has not exited, nor for
	// guardHoldoff after the last one did (up to guardKilledMax after the kill). The
	// guard writes the time before it resumes the sandbox it paused to list it, and while its
	// kill of a process group takes effect the group's dying processes hold no memory the
	// enforcer can see, so it would choose an innocent process (a background command's shell
	// was killed in 6 of 7 runs; in a sandbox slowed by a loaded host, 194 killed processes
	// took longer than guardHoldoff to exit, and an idle background process was killed). This
	// is Linux's rule too: no new OOM victim while the last one is exiting.
	GuardKill string
	// FastInterval and SlowInterval are the polling periods of the usage; defaults 100 ms and
	// 250 ms (see the type's comment).
	FastInterval, SlowInterval time.Duration
	Log                        *slog.Logger

	kills atomic.Int64
	// Run's goroutine only:
	lastWarn   time.Time // of the last warning
	pressureFD *os.File  // Pressure, open
	// guardAt is the guard's last kill time as guardKilling last read it; killedOf the guard
	// kill whose killed processes were last seen not yet exited, at killedSeen; lastKill the
	// time of the enforcer's own last kill.
	guardAt, killedOf, killedSeen, lastKill time.Time
}

// Kills returns how many processes the enforcer has killed; a nil Enforcer has killed none.
func (e *Enforcer) Kills() int64 {
	if e == nil {
		return 0
	}
	return e.kills.Load()
}

// CgroupUsage returns a Usage reading the memory use of the cgroup mounted at root: v2's
// memory.current, else v1's memory/memory.usage_in_bytes (gVisor's cgroupfs serves the latter
// from the Sentry's own accounting).
func CgroupUsage(root string) func() (int64, error) {
	paths := []string{filepath.Join(root, "memory.current"), filepath.Join(root, "memory", "memory.usage_in_bytes")}
	return func() (int64, error) {
		var first error
		for _, p := range paths {
			n, err := readInt(p)
			if err == nil || !errors.Is(err, os.ErrNotExist) {
				return n, err
			}
			if first == nil {
				first = err
			}
		}
		return 0, fmt.Errorf("memory usage: %w", first)
	}
}

// Run enforces the limit until ctx ends. It returns an error only when the usage cannot be
// read at the start (then nothing is enforced).
func (e *Enforcer) Run(ctx context.Context) error {
	if e.Limit <= 0 {
		return errors.New("oom enforcer: no limit")
	}
	usage := e.Usage
	if usage == nil {
		usage = CgroupUsage("/sys/fs/cgroup")
	}
	if _, err := usage(); err != nil {
		return fmt.Errorf("oom enforcer: %w", err)
	}
	fast, slow := e.FastInterval, e.SlowInterval
	if fast <= 0 {
		fast = 100 * time.Millisecond
	}
	if slow <= 0 {
		slow = 250 * time.Millisecond
	}
	t := time.NewTimer(0)
	defer t.Stop()
	last, idle := int64(-1), slow // the previous usage read (-1: none) and the current back-off
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if e.Pressure != "" && e.calm() {
			last, idle = -1, slow
			t.Reset(pressureInterval)
			continue
		}
		used, err := usage()
		next := slow
		switch {
		case err != nil:
			e.warn("oom enforcer: read usage", "err", err)
		case used > e.Limit:
			e.killOne(ctx, used, usage)
			next = fast
		case used > e.Limit-e.Limit/8 && (last < 0 || used > last+growthStep):
			next = fast
		case used > e.Limit-e.Limit/8 || used <= last+growthStep:
			// Near the limit but not growing (or far below it): back off, doubling up to
			// steadyMax, so a sandbox that runs at its limit does not pay for fast reads.
			idle = min(max(idle*2, slow), steadyMax)
			next = idle
		}
		if next == fast {
			idle = slow
		}
		last = used
		t.Reset(next)
	}
}

// growthStep is the growth of the usage between two reads that counts as growing; steadyMax
// is the longest wait between reads while it does not grow (a lite sandbox allocates at most
// ~50 MB/s under gVisor: 100 MB in steadyMax, within its host cgroup's room above the limit,
// where hutchd's guard acts).
const (
	growthStep = 1 << 20
	steadyMax  = 2 * time.Second
)

// pressureInterval is how often the enforcer reads Pressure while it says "0". Each wake-up of
// the agent costs the Sentry: polling every 100 ms took 15 ms a second of a lite sandbox's CPU
// (a quarter of its quota) while idle.
const pressureInterval = 500 * time.Millisecond

// calm reports whether Pressure says "0", read from a descriptor kept open (pread: no open and
// close per poll; with --file-access=shared the Sentry reads the host file each time).
func (e *Enforcer) calm() bool {
	if e.pressureFD == nil {
		f, err := os.Open(e.Pressure)
		if err != nil {
			return false
		}
		e.pressureFD = f
	}
	var b [8]byte
	n, err := e.pressureFD.ReadAt(b[:], 0)
	if n == 0 && err != nil {
		e.pressureFD.Close()
		e.pressureFD = nil // the guard replaced the file: open the new one next time
		return false
	}
	return string(bytes.TrimSpace(b[:n])) == "0"
}

// warn logs at most one line per warnEvery (an attacker can make the enforcer fail every poll).
func (e *Enforcer) warn(msg string, args ...any) {
	if time.Since(e.lastWarn) < warnEvery {
		return
	}
	e.lastWarn = time.Now()
	e.logger().Warn(msg, args...)
}

// warnEvery is the least time between two warnings of an Enforcer.
const warnEvery = 10 * time.Second

func (e *Enforcer) logger() *slog.Logger {
	if e.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Log
}

// killOne kills the process of the highest badness and waits (up to a second) until it is
// gone and its memory is back, so that one overshoot never costs two processes.
func (e *Enforcer) killOne(ctx context.Context, used int64, usage func() (int64, error)) {
	if e.guardKilling() {
		return
	}
	v, held, ok := e.victim()
	if !ok {
		e.warn("oom enforcer: over the limit and nothing to kill", "usage", used, "limit", e.Limit)
		return
	}
	if over := used - e.Limit; over > held && e.recentKill() {
		// Shortly after a kill, killing every process it may kill would not bring the usage
		// under the limit: the memory is the killed processes', which the Sentry has not taken
		// back yet, and a kill would only end an innocent process. Later the same excess is
		// memory no process maps (SysV shared memory, an unmapped memfd, files in memory): then
		// the enforcer kills as Linux does, or such memory would switch it off.
		e.warn("oom enforcer: over the limit by more than the processes hold, after a kill; nothing killed",
			"usage", used, "limit", e.Limit, "held", held)
		return
	}
	if e.guardKilling() { // the list took time: look again just before the kill
		return
	}
	if err := syscall.Kill(v.pid, syscall.SIGKILL); err != nil {
		return // gone meanwhile: the next poll decides again
	}
	e.kills.Add(1)
	e.lastKill = time.Now()
	e.logger().Warn("oom enforcer: killed a process over the sandbox's memory limit",
		"pid", v.pid, "comm", v.comm, "rss_bytes", v.rss, "usage", used, "limit", e.Limit)
	// Every step costs the Sentry a stat, and a usage read once the process is gone.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(25 * time.Millisecond)
		if _, err := os.Stat(filepath.Join(e.proc(), strconv.Itoa(v.pid))); err == nil {
			continue
		}
		if u, err := usage(); err == nil && u <= e.Limit {
			return
		}
	}
}

// guardHoldoff is how long after the memory guard's kill, and after the last process it
// killed exited, the enforcer kills nothing: the guard's rounds and the Sentry's giving the
// memory back take a few seconds (measured: rounds up to 1.5 s after the time is written,
// memory back in ~3 s). guardKilledMax bounds the wait for the killed processes to exit:
// SIGKILL cannot be caught, so one still there after it is stuck, and the enforcer goes back
// to work. memoryReturn is how long after a kill (the guard's or its own) the usage may still
// count memory the killed processes held (seen: over 6 s after a fork bomb's kill on a loaded
// host).
const (
	guardHoldoff   = 5 * time.Second
	guardKilledMax = time.Minute
	memoryReturn   = 20 * time.Second
)

// guardKill returns the time of hutchd's memory guard's last kill (GuardKill), and false when
// there is none, or it is further ahead of our clock than guardHoldoff (a clock stepped back:
// it would otherwise hold the enforcer off until the clock caught up).
func (e *Enforcer) guardKill() (time.Time, bool) {
	if e.GuardKill == "" {
		return time.Time{}, false
	}
	at, err := readInt(e.GuardKill)
	if err != nil || at <= 0 {
		return time.Time{}, false
	}
	t := time.Unix(0, at)
	return t, time.Until(t) < guardHoldoff
}

// guardKilling reports whether hutchd's memory guard killed less than guardHoldoff ago, or a
// process it killed (GuardKilledFile) has not exited yet (up to guardKilledMax after the
// kill), or the last one exited less than guardHoldoff ago.
func (e *Enforcer) guardKilling() bool {
	at, ok := e.guardKill()
	if !ok {
		return false
	}
	e.guardAt = at
	since := time.Since(at)
	if since < guardHoldoff {
		return true
	}
	if since < guardKilledMax && e.killedExiting() {
		e.killedOf, e.killedSeen = at, time.Now()
		return true
	}
	return e.killedOf.Equal(at) && time.Since(e.killedSeen) < guardHoldoff
}

// recentKill reports whether the guard (its kill time as guardKilling last read it) or the
// enforcer killed, or a process the guard killed was seen exiting, less than memoryReturn ago:
// the usage may still count their memory.
func (e *Enforcer) recentKill() bool {
	return time.Since(e.guardAt) < memoryReturn || time.Since(e.killedSeen) < memoryReturn || time.Since(e.lastKill) < memoryReturn
}

// killedExiting reports whether a process named in GuardKilledFile (beside GuardKill, as
// PID:PGID pairs) is still there, in the same process group, and not a zombie (a zombie holds
// no memory). Only the processes the guard signalled count: one that joins a killed group
// later (setpgid within its session, while an unreaped zombie keeps the group) does not.
func (e *Enforcer) killedExiting() bool {
	b, err := os.ReadFile(filepath.Join(filepath.Dir(e.GuardKill), filepath.Base(GuardKilledFile)))
	if err != nil {
		return false
	}
	for _, f := range bytes.Fields(b) {
		pidText, pgidText, ok := bytes.Cut(f, []byte(":"))
		if !ok {
			continue
		}
		pid, err1 := strconv.Atoi(string(pidText))
		pgid, err2 := strconv.Atoi(string(pgidText))
		if err1 != nil || err2 != nil || pid <= 1 {
			continue
		}
		st, ok := readStat(filepath.Join(e.proc(), strconv.Itoa(pid), "stat"))
		if ok && st.pgid == pgid && st.state != 'Z' && st.state != 'X' {
			return true
		}
	}
	return false
}

func (e *Enforcer) proc() string {
	if e.Proc == "" {
		return "/proc"
	}
	return e.Proc
}

// candidate is a process the enforcer may kill.
type candidate struct {
	pid, pgid int
	comm      string
	rss       int64 // bytes
	points    int64 // badness, in pages
}

// victim returns the process to kill: among the processes of the process group whose
// processes' badness adds up to the most, the one of the highest badness. A process's badness
// is Linux's oom_badness: resident pages + oom_score_adj (at least 0) × (limit in pages) /
// 1000. Skipped are pid 1, Server, its shims and processes without memory (no mm: zombies).
// held is the resident memory of all the processes it may kill, in bytes.
//
// The group comes first, unlike Linux, for fork bombs: their memory is spread over many small
// processes of one group (each command the agent runs has its own), and Linux's choice, the
// largest single process, was an innocent one (a background command's shell of 4.8 MB against
// the bomb's Pythons of ~3.5 MB each). One process at a time all the same:
// a single hog is still the one killed, since its group adds up to the most, and the rest of
// a bomb is hutchd's guard's to kill (runsc/guard.go), which kills the whole group.
func (e *Enforcer) victim() (_ candidate, held int64, _ bool) {
	ents, err := os.ReadDir(e.proc())
	if err != nil {
		return candidate{}, 0, false
	}
	page := int64(os.Getpagesize())
	limitPages := e.Limit / page
	var all []candidate
	groups := map[int]int64{}
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == 1 || pid == e.Server {
			continue
		}
		dir := filepath.Join(e.proc(), ent.Name())
		st, ok := readStat(filepath.Join(dir, "stat"))
		if !ok {
			continue
		}
		ppid, pgid := st.ppid, st.pgid
		if e.Self != "" && e.Server != 0 && ppid == e.Server {
			// The shims are non-dumpable (hutch-init's nondumpable), so their exe link is
			// refused to the agent, which lacks CAP_SYS_PTRACE: a refused link of a child of
			// the server is a shim too. git also runs under a shim (gitclone.Command), so git itself
			// is a shim's child and counted like any command.
			exe, err := os.Readlink(filepath.Join(dir, "exe"))
			if (err == nil && exe == e.Self) || errors.Is(err, fs.ErrPermission) {
				continue
			}
		}
		rssPages, ok := residentPages(filepath.Join(dir, "statm"))
		if !ok || rssPages == 0 {
			continue
		}
		adj := int64(0)
		if b, err := os.ReadFile(filepath.Join(dir, "oom_score_adj")); err == nil {
			adj, _ = strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
		}
		adj = max(adj, 0) // see the type's comment
		c := candidate{pid: pid, pgid: pgid, rss: rssPages * page, points: rssPages + adj*limitPages/1000}
		all = append(all, c)
		groups[pgid] += c.points
		held += c.rss
	}
	var best candidate
	found := false
	for _, c := range all {
		if !found || groups[c.pgid] > groups[best.pgid] || (c.pgid == best.pgid && c.points > best.points) {
			best, found = c, true
		}
	}
	if found {
		comm, _ := os.ReadFile(filepath.Join(e.proc(), strconv.Itoa(best.pid), "comm"))
		best.comm = string(bytes.TrimSpace(comm))
	}
	return best, held, found
}

// stat is what the enforcer reads of a /proc/PID/stat.
type stat struct {
	state      byte // R, S, D, Z, ...
	ppid, pgid int
}

// readStat reads the state, the parent's PID and the process group from a /proc/PID/stat
// ("pid (comm) state ppid pgrp …"; comm may hold spaces and parentheses, so the fields after
// the last ")" are counted).
func readStat(path string) (stat, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return stat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return stat{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgid, err2 := strconv.Atoi(string(f[2]))
	return stat{state: f[0][0], ppid: ppid, pgid: pgid}, err1 == nil && err2 == nil
}

// residentPages reads the resident field (the second) of a /proc/PID/statm.
func residentPages(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(f[1]), 10, 64)
	return n, err == nil
}
