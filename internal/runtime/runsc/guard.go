package runsc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// The memory guard is the host-side backstop of a gVisor sandbox's memory limit. Inside,
// hutchd's agent enforces the limit (internal/agent/oom): it reads the usage and kills the
// process Linux would. But the agent is one more task of the Sentry, which schedules its tasks
// with no regard for nice values: under hundreds of busy tasks (a fork bomb) in a sandbox of a
// sixteenth of a CPU the agent runs too rarely to act, the Sentry's memory reaches the host
// cgroup's limit (SentryMemory) and the host's OOM killer ends the whole sandbox. The guard
// runs in hutchd, outside the sandbox's CPU limit: it polls the host cgroup's memory use every
// guardInterval and, past guardTrigger, pauses the sandbox, lists its processes and kills,
// through the Sentry's control socket (which needs no task of the sandbox to run), the process
// group with the most processes, never the agent's (contain).
//
// runsc reports no memory per process, so the guard chooses by count: a fork bomb is the
// case the agent cannot handle, and its processes share a process group (each command the
// agent runs has its own). A single process past the limit is the agent's to kill.
//
// The guard also tells the agent when to look: reading the sandbox's memory use inside gVisor
// makes the Sentry scan its memory file (about 3 ms of a lite sandbox's CPU per read, half of
// its quota at 10 reads a second), while the host cgroup's use costs the guard nothing and is
// never below the use inside. So the guard keeps GuardPressureFile at "1" while the host use is
// above the sandbox's own limit (and "0" again once it is 1/16 below it), and the agent reads
// the use inside only then.
//
// A guard kill is reported like an OOM kill: before each kill the guard writes the time in
// GuardKillFile, which the agent compares with the value when a process started (a time, not a
// count: it only grows, across hutchd restarts and memory wakes, which recreate the file).
//
// The files live in the bundle's guard directory, bound read-only at GuardDir in the sandbox.

// GuardDir is where the memory guard's files are readable inside a gVisor sandbox;
// internal/agent/oom reads them. GuardKillFile holds the Unix time in nanoseconds of the guard's
// last kill ("0": none), GuardPressureFile "1" while the host memory use is above the sandbox's
// limit, else "0".
const (
	GuardDir          = "/run/hutch-guard"
	GuardKillFile     = GuardDir + "/last_kill"
	GuardPressureFile = GuardDir + "/pressure"
)

// guardLimitFile, in the guard directory, keeps the sandbox's own memory limit (bytes) for a
// guard started by Adopt.
const guardLimitFile = "memory_limit"

// guardInterval is how often a guard reads its sandbox's host memory use; settleStep and
// settleMax bound the wait after a kill (settle).
const (
	guardInterval = 50 * time.Millisecond
	settleStep    = 500 * time.Millisecond
	settleMax     = 15 * time.Second
	// pauseMax bounds a pause or resume (pauseUncancelled).
	pauseMax = 2 * time.Minute
)

// guardTrigger is the host memory use past which the guard kills, for a sandbox limited to own
// bytes in a host cgroup limited to host: halfway between the two (3/4 of host without own).
// The agent keeps the sandbox's processes under own, so above it is only the Sentry's memory:
// its base and the tasks' (SentryMemory gives the host limit room for the pids limit's tasks at
// ~0.5 MiB; half of that room takes ~0.45 MiB times the pids limit), and the guard acts when
// the agent could not or the tasks outgrew that. The half above the trigger is what a fork
// bomb may still take while the guard pauses, lists and kills: up to 155 MiB measured in a
// lite sandbox on a loaded host, where the trigger leaves 320 MiB (896 MiB host limit).
func guardTrigger(own, host int64) int64 {
	if own <= 0 || own >= host {
		return host - host/4
	}
	return own + (host-own)/2
}

// guardDir is the bundle's directory mounted read-only at GuardDir.
func (r *Runtime) guardDir(id string) string { return filepath.Join(r.bundle(id), "guard") }

// guardMount is the spec mount of guardDir.
func (r *Runtime) guardMount(id string) specs.Mount {
	return specs.Mount{Destination: GuardDir, Type: "bind", Source: r.guardDir(id), Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec"}}
}

// initGuardDir (re)creates id's guard directory for a sandbox limited to limit bytes.
func (r *Runtime) initGuardDir(id string, limit int64) error {
	if err := os.MkdirAll(r.guardDir(id), 0o755); err != nil {
		return err
	}
	for name, v := range map[string]int64{filepath.Base(GuardKillFile): 0, filepath.Base(GuardPressureFile): 0, guardLimitFile: limit} {
		if err := r.writeGuardFile(id, name, v); err != nil {
			return err
		}
	}
	return nil
}

// writeGuardFile replaces file name of id's guard directory with v (decimal and a newline).
func (r *Runtime) writeGuardFile(id, name string, v int64) error {
	dir := r.guardDir(id)
	tmp := filepath.Join(dir, "."+name)
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(v, 10)+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// setPressure overwrites the pressure file in place ("0\n" and "1\n" have one length), not by
// a rename: the agent keeps it open and rereads it (oom.Enforcer).
func (r *Runtime) setPressure(id string, on bool) error {
	f, err := os.OpenFile(filepath.Join(r.guardDir(id), filepath.Base(GuardPressureFile)), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt([]byte(map[bool]string{false: "0\n", true: "1\n"}[on]), 0)
	return errors.Join(err, f.Close())
}

// guards tracks the running guard of each container.
type guards struct {
	mu     sync.Mutex
	cancel map[string]context.CancelFunc
}

// Adopt starts the memory guard of a running container that a restarted hutchd took over
// (runtime.Adopter); Start and Restore start it themselves.
func (r *Runtime) Adopt(id string) { r.startGuard(id) }

// startGuard starts id's guard unless it runs already.
func (r *Runtime) startGuard(id string) {
	r.guards.mu.Lock()
	defer r.guards.mu.Unlock()
	if _, ok := r.guards.cancel[id]; ok {
		return
	}
	if r.guards.cancel == nil {
		r.guards.cancel = map[string]context.CancelFunc{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.guards.cancel[id] = cancel
	go func() {
		r.guard(ctx, id)
		r.guards.mu.Lock()
		defer r.guards.mu.Unlock()
		if ctx.Err() == nil { // not replaced by stopGuard and a new start
			delete(r.guards.cancel, id)
		}
		cancel()
	}()
}

// stopGuard stops id's guard, if any.
func (r *Runtime) stopGuard(id string) {
	r.guards.mu.Lock()
	defer r.guards.mu.Unlock()
	if cancel, ok := r.guards.cancel[id]; ok {
		cancel()
		delete(r.guards.cancel, id)
	}
}

// guard watches id until ctx ends or its cgroup is gone.
func (r *Runtime) guard(ctx context.Context, id string) {
	usagePath, limitPath, ok := ocispec.MemoryFiles(r.spec.CgroupDirs(id))
	if !ok {
		return
	}
	limit, err := ocispec.ReadInt(limitPath)
	if err != nil || limit <= 0 || limit >= 1<<62 {
		return // "max" or unlimited: no limit to guard
	}
	// The sandbox's own limit, for the trigger and the pressure signal (0: none).
	own, _ := ocispec.ReadInt(filepath.Join(r.guardDir(id), guardLimitFile))
	trigger := guardTrigger(own, limit)
	p, _ := ocispec.ReadInt(filepath.Join(r.guardDir(id), filepath.Base(GuardPressureFile)))
	pressure := p == 1
	signalled := signalledSet{}
	t := time.NewTicker(guardInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		used, err := ocispec.ReadInt(usagePath)
		if err != nil {
			return // the cgroup is gone: the container ended
		}
		if own > 0 && (used > own) != pressure && (used > own || used < own-own/16) {
			pressure = used > own
			if err := r.setPressure(id, pressure); err != nil {
				r.log.Warn("memory guard: pressure file", "id", id, "err", err)
			}
		}
		if used <= trigger {
			continue
		}
		if !r.contain(ctx, id, usagePath, used, trigger, limit, signalled) {
			time.Sleep(settleStep) // no line per poll
			continue
		}
		r.settle(ctx, usagePath, trigger)
	}
}

// contain kills the process group of id that the guard chooses when the host memory use (used)
// passed trigger, and reports whether it killed one.
//
//  1. It pauses the sandbox (`runsc pause`) under its CPU quota. A pause stops every task
//     between system calls, so the list taken next is complete and no fork is in progress.
//     The Sentry serves the pause under the quota, so under a fork bomb it takes seconds
//     (0.7 to 7.6 s measured on a loaded host), while the bomb grows at its throttled pace
//     (up to 155 MiB). Lifting the quota during the pause makes it worse: the bomb then
//     outgrows it (136 MiB in 0.36 s; a sandbox lost when the quota was lifted after 5 s).
//  2. It lists the processes (`runsc ps`), chooses the group (pickGroup; the processes of
//     signalled are left out) and writes GuardKillFile.
//  3. It SIGKILLs the group while the sandbox is paused, through the Sentry's control socket
//     (signalGroup: runsc refuses to signal a paused sandbox). Every listed task of the group
//     dies before it runs again, so the bomb forks no more. A group that has no live process
//     (zombies) is passed over for the next of the list.
//  4. It resumes the sandbox, raises the CPU quota to one CPU (liftCPUQuota) for the killed
//     tasks' exits, and signals the group until it is gone (killGroup).
//
// Measured with a python fork bomb in a lite sandbox on a host with both CPUs busy, 10 runs
// (TestMemoryGuardStopsForkBomb): peaks of 599 to 731 MiB on the host for a trigger of 576 MiB
// and a host limit of 896 MiB; the peak came at the end of the pause each time. Killing after
// the resume, as the guard did before, added up to 165 MiB in the kill's 0.7 s.
//
// A sandbox paused by someone else (a disk capture, internal/sandbox) is left paused and not
// killed: it does not grow. contain holds pauseMu, which Pause and Resume take too, so a
// capture's pause waits for contain's resume instead of being undone by it. When the pause
// fails otherwise, contain kills unpaused.
func (r *Runtime) contain(ctx context.Context, id, usagePath string, used, trigger, limit int64, signalled signalledSet) bool {
	r.pauseMu.Lock()
	defer r.pauseMu.Unlock()
	start := time.Now()
	peak := watchPeak(usagePath, used)
	defer peak()
	k := GuardKill{ID: id, Usage: used, Trigger: trigger, HostLimit: limit}
	phase := func(d *time.Duration) {
		*d = time.Since(start) - k.Pause - k.List - k.Resume
	}
	restore := func() {}
	defer func() { restore() }()
	perr := r.pauseUncancelled(ctx, id)
	phase(&k.Pause)
	if errors.Is(perr, errdefs.ErrFailedPrecondition) {
		r.log.Warn("memory guard: over the trigger, but the sandbox is paused or stopped", "id", id, "usage", used, "trigger", trigger, "err", perr)
		return false
	}
	paused := perr == nil
	ps, err := r.listProcesses(ctx, id)
	if err == nil {
		ps = signalled.filter(ps)
	}
	pgid, n := pickGroup(ps)
	phase(&k.List)
	if err == nil && pgid != 0 {
		// Before the resume, so that the agent's enforcer, which holds off after a guard
		// kill (oom.Enforcer.GuardKill), sees it as soon as it runs again.
		if err := r.writeGuardFile(id, filepath.Base(GuardKillFile), time.Now().UnixNano()); err != nil {
			r.log.Warn("memory guard: kill file", "id", id, "err", err)
		}
	}
	// Killed while paused, the group's tasks die before they run again, forking no more
	// (signalGroup); the signals after the resume then find it gone or exiting. A group with
	// no live process (zombies PID 1 has not reaped yet) is passed over for the next.
	killedPaused := 0
	for skipped := 0; paused && err == nil && pgid != 0; skipped++ {
		kerr := r.signalGroup(ctx, id, pgid, unix.SIGKILL)
		if kerr == nil {
			killedPaused = 1
			break
		}
		if !errors.Is(kerr, errGroupGone) || skipped >= maxSkippedGroups {
			if !errors.Is(kerr, errGroupGone) {
				r.log.Warn("memory guard: kill while paused", "id", id, "pgid", pgid, "err", kerr)
			}
			break
		}
		signalled.add(ps, pgid)
		ps = slices.DeleteFunc(ps, func(p psEntry) bool { return p.PGID == pgid })
		if next, m := pickGroup(ps); next != 0 {
			pgid, n = next, m
		} else {
			break
		}
	}
	if paused {
		if rerr := r.resumeUncancelled(ctx, id); rerr != nil {
			r.log.Error("memory guard: resume after listing", "id", id, "err", rerr)
			return false
		}
	}
	phase(&k.Resume)
	if err != nil || pgid == 0 {
		r.log.Warn("memory guard: over the trigger and nothing to kill", "id", id, "usage", used, "trigger", trigger, "paused", paused, "pause_err", perr, "err", err)
		return false
	}
	restore = r.liftCPUQuota(id)
	var rounds int
	for skipped := 0; ; skipped++ {
		var gone bool
		rounds, gone, err = r.killGroup(ctx, id, pgid)
		rounds += killedPaused
		killedPaused = 0
		signalled.add(ps, pgid)
		// A group that took no signal had no live process left: its members exited, or are
		// zombies that PID 1 has not reaped yet (runsc ps lists them; seen after the guard
		// killed a decoy group of 260 sleeping processes, whose zombies it then chose again
		// while a fork bomb in another group grew). A group still there after killGroupMax
		// does not die: zombies whose parent lives on (a breaker's decoy: 260 children that
		// exited, never reaped), which the Sentry signals without an error. The next group of
		// the same list then.
		if (rounds > 0 && gone) || err != nil || skipped >= maxSkippedGroups {
			break
		}
		ps = slices.DeleteFunc(ps, func(p psEntry) bool { return p.PGID == pgid })
		next, m := pickGroup(ps)
		if next == 0 {
			break
		}
		pgid, n = next, m
	}
	k.Kill = time.Since(start) - k.Pause - k.List - k.Resume
	k.PGID, k.Processes, k.Rounds, k.Err, k.Peak = pgid, n, rounds, err, peak()
	r.log.Warn("memory guard: killed a process group of a sandbox near its host memory limit",
		"id", id, "pgid", pgid, "processes", n, "rounds", rounds, "paused", paused, "pause_err", perr,
		"pause", k.Pause.Round(time.Millisecond), "list", k.List.Round(time.Millisecond),
		"resume", k.Resume.Round(time.Millisecond), "kill", k.Kill.Round(time.Millisecond),
		"usage", used, "peak", k.Peak, "trigger", trigger, "host_limit", limit, "err", err)
	if r.onGuardKill != nil {
		r.onGuardKill(k)
	}
	return true
}

// peakInterval is how often watchPeak samples the host memory use during a contain.
const peakInterval = 10 * time.Millisecond

// watchPeak samples usagePath every peakInterval until the returned function is first called;
// it returns the highest value seen (at least first).
func watchPeak(usagePath string, first int64) (stop func() int64) {
	done := make(chan struct{})
	result := make(chan int64, 1)
	go func() {
		peak := first
		t := time.NewTicker(peakInterval)
		defer t.Stop()
		for {
			if u, err := ocispec.ReadInt(usagePath); err == nil && u > peak {
				peak = u
			}
			select {
			case <-done:
				result <- peak
				return
			case <-t.C:
			}
		}
	}()
	return sync.OnceValue(func() int64 {
		close(done)
		return <-result
	})
}

// signalledSet holds the PIDs a guard's kills have signalled that were still listed at its last
// listing: zombies, or processes that do not die. A later choice leaves them out
// (filter): a group of zombies whose parent lives on takes every signal without an error and
// would be chosen again and again.
type signalledSet map[int]bool

// filter returns ps without the PIDs of s, and forgets the PIDs of s not in ps (gone, so
// their number may be used again).
func (s signalledSet) filter(ps []psEntry) []psEntry {
	listed := make(map[int]bool, len(ps))
	var out []psEntry
	for _, p := range ps {
		listed[p.PID] = true
		if !s[p.PID] {
			out = append(out, p)
		}
	}
	for pid := range s {
		if !listed[pid] {
			delete(s, pid)
		}
	}
	return out
}

// add records the processes of group pgid in ps as signalled.
func (s signalledSet) add(ps []psEntry, pgid int) {
	for _, p := range ps {
		if p.PGID == pgid {
			s[p.PID] = true
		}
	}
}

// GuardKill describes a memory guard's kill (Config.OnGuardKill): of process group PGID
// (Processes processes when listed) in container ID, in Rounds SIGKILLs, when the host cgroup's
// memory use was Usage bytes, past Trigger, of a limit of HostLimit. Peak is the highest use
// sampled (every 10 ms) from then to the last round. Pause, List, Resume and Kill are how long
// contain's steps took (Pause and Resume 0 when the sandbox was not paused). Err is the last
// refusal of a kill other than the group's absence, if any.
type GuardKill struct {
	ID                        string
	PGID, Processes, Rounds   int
	Usage, Peak, Trigger      int64
	HostLimit                 int64
	Pause, List, Resume, Kill time.Duration
	Err                       error
}

// pauseUncancelled and resumeUncancelled run `runsc pause` and `runsc resume` to the end,
// whatever ctx does (bounded by pauseMax). runsc records the new state only after the Sentry
// answered: a pause cut short can leave the Sentry paused with runsc's state "running", and
// since the Sentry counts pauses, no later resume (refused: "not paused") nor a second pause
// and its resume would then restart the tasks. Seen: a guard's pause past a 3 s timeout,
// retried, left a sandbox's tasks stopped for good.
func (r *Runtime) pauseUncancelled(ctx context.Context, id string) error {
	return r.runUncancelled(ctx, id, "pause")
}

func (r *Runtime) resumeUncancelled(ctx context.Context, id string) error {
	return r.runUncancelled(ctx, id, "resume")
}

// runUncancelled runs `runsc OP id.` to its end whatever ctx does, bounded by pauseMax.
func (r *Runtime) runUncancelled(ctx context.Context, id, op string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pauseMax)
	defer cancel()
	_, err := r.runSimple(ctx, op, id, op, runscID(id))
	return err
}

// liftCPUQuota raises id's CPU quota to one CPU, if it is lower, and returns the function
// that puts it back. runsc's control channel is served by the Sentry, which is throttled by
// that quota as a whole: in a lite sandbox (a sixteenth of a CPU) busy with a fork bomb, a
// pause took up to 3 s and `runsc kill` 4.5 s (once more than 10 s), while the bomb grew. One
// CPU, not none: the bomb runs as fast as the Sentry does while the kill is delivered, and on
// a host of many CPUs an unbounded Sentry would grow it many times as fast. While the quota is
// raised the sandbox still gets only its cpu.shares' part of a busy host.
func (r *Runtime) liftCPUQuota(id string) (restore func()) {
	for _, dir := range r.spec.CgroupDirs(id) {
		for _, file := range []string{"cpu.cfs_quota_us", "cpu.max"} {
			path := filepath.Join(dir, file)
			old, err := os.ReadFile(path)
			if err != nil {
				continue
			}
			period, _ := ocispec.ReadInt(filepath.Join(dir, "cpu.cfs_period_us")) // v1 only
			lifted := liftedQuota(file, string(old), period)
			if lifted == "" {
				return func() {}
			}
			if err := os.WriteFile(path, []byte(lifted), 0); err != nil {
				r.log.Warn("memory guard: lift the CPU quota", "id", id, "err", err)
				return func() {}
			}
			return func() {
				if err := os.WriteFile(path, bytes.TrimSpace(old), 0); err != nil && !os.IsNotExist(err) {
					r.log.Warn("memory guard: restore the CPU quota", "id", id, "err", err)
				}
			}
		}
	}
	return func() {}
}

// liftedQuota is what liftCPUQuota writes in place of old, the content of file: cgroup v1's
// cpu.cfs_quota_us (microseconds per period, -1 for none; period is cpu.cfs_period_us) or v2's
// cpu.max ("QUOTA PERIOD", QUOTA "max" for none). It is a quota of one CPU, or "" when old
// allows one CPU already or cannot be read.
func liftedQuota(file, old string, period int64) string {
	switch file {
	case "cpu.cfs_quota_us":
		q, err := strconv.ParseInt(strings.TrimSpace(old), 10, 64)
		if err != nil || q < 0 || period <= 0 || q >= period {
			return ""
		}
		return strconv.FormatInt(period, 10)
	case "cpu.max":
		f := strings.Fields(old)
		if len(f) != 2 || f[0] == "max" {
			return ""
		}
		q, err1 := strconv.ParseInt(f[0], 10, 64)
		p, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || p <= 0 || q >= p {
			return ""
		}
		return f[1] + " " + f[1]
	}
	return ""
}

// killGroupMax bounds the time killGroup signals one group, killRoundGap is its pause between
// two signals; maxSkippedGroups bounds the groups contain passes over because they took no
// signal or did not die.
const (
	killGroupMax     = 5 * time.Second
	killRoundGap     = 20 * time.Millisecond
	maxSkippedGroups = 4
)

// killGroup SIGKILLs process group pgid of id until the group is gone (the Sentry refuses the
// signal: "no such process group", or "no such process" for a group whose members are all
// exiting), for at most killGroupMax, and returns how many signals reached it and whether it
// is gone. One is not enough for a fork bomb that runs: gVisor signals the group's members
// one by one, and a member's fork in progress completes with a child that got no signal
// (measured: 158 processes killed, 165 in the same group 1.8 s later). It signals through the
// control socket (signalGroup), else with `runsc kill`. err is the last refusal other than the
// group's absence, or ctx's.
func (r *Runtime) killGroup(ctx context.Context, id string, pgid int) (rounds int, gone bool, err error) {
	control := true
	deadline := time.Now().Add(killGroupMax)
	for ctx.Err() == nil {
		kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var kerr error
		if control {
			kerr = r.signalGroup(kctx, id, pgid, unix.SIGKILL)
			if errors.Is(kerr, errNoControl) {
				r.log.Warn("memory guard: control socket, using runsc kill", "id", id, "err", kerr)
				control = false
			}
		}
		if !control {
			_, kerr = r.runSimple(kctx, "kill", id, "kill", "--pgid", strconv.Itoa(pgid), runscID(id), "KILL")
		}
		cancel()
		if kerr != nil {
			// "… process group", or a group of only exiting members
			if errors.Is(kerr, errGroupGone) || strings.Contains(kerr.Error(), "no such process") {
				return rounds, true, nil
			}
			return rounds, false, kerr
		}
		rounds++
		if time.Now().After(deadline) {
			return rounds, false, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(killRoundGap):
		}
	}
	return rounds, false, ctx.Err()
}

// settle waits, after a kill, while the Sentry gives the killed group's memory back to the host
// (it does so gradually: measured ~3 s from 563 MiB to 117 MiB in a lite sandbox), so that a
// second group dies only for memory still growing: it returns when the use is at or under
// trigger, when it stopped falling for half a second, or after settleMax.
func (r *Runtime) settle(ctx context.Context, usagePath string, trigger int64) {
	prev, err := ocispec.ReadInt(usagePath)
	if err != nil {
		return
	}
	deadline := time.Now().Add(settleMax)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(settleStep)
		u, err := ocispec.ReadInt(usagePath)
		if err != nil || u <= trigger || u >= prev {
			return
		}
		prev = u
	}
}

// psEntry is a process of `runsc ps` (gVisor's control.Process).
type psEntry struct {
	PID, PPID, PGID int
	Cmd             string
}

// listProcesses returns id's processes (`runsc ps`), zombies included.
func (r *Runtime) listProcesses(ctx context.Context, id string) ([]psEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The table: `--format json` lists PIDs only, as runc's does.
	out, err := r.runSimple(ctx, "ps", id, "ps", runscID(id))
	if err != nil {
		return nil, err
	}
	ps, err := parsePS(out)
	if err != nil {
		return nil, fmt.Errorf("runsc ps %s: %w", id, err)
	}
	return ps, nil
}

// parsePS reads `runsc ps`'s table: a header "UID PID PPID PGID C TTY STIME TIME CMD", then a
// line per process.
func parsePS(out []byte) ([]psEntry, error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if h := strings.Fields(lines[0]); len(h) < 9 || h[1] != "PID" || h[2] != "PPID" || h[3] != "PGID" || h[8] != "CMD" {
		return nil, fmt.Errorf("unexpected header %q", lines[0])
	}
	var ps []psEntry
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 9 {
			return nil, fmt.Errorf("unexpected line %q", l)
		}
		var p psEntry
		var err error
		for i, dst := range []*int{&p.PID, &p.PPID, &p.PGID} {
			if *dst, err = strconv.Atoi(f[1+i]); err != nil {
				return nil, fmt.Errorf("unexpected line %q", l)
			}
		}
		p.Cmd = strings.Join(f[8:], " ")
		ps = append(ps, p)
	}
	return ps, nil
}

// pickGroup returns the process group with the most processes in ps, and its size (0, 0:
// none). Protected are PID 1's group and the agent server's: the
// first hutch-init child of PID 1 (the lowest PID; PID 1 starts it before any command runs, so
// a process that names itself hutch-init and is reparented to PID 1 later has a higher one).
// A tie goes to the lower group ID.
func pickGroup(ps []psEntry) (pgid, n int) {
	protected := map[int]bool{0: true}
	server := psEntry{}
	for _, p := range ps {
		if p.PID == 1 {
			protected[p.PGID] = true
		}
		if p.PPID == 1 && strings.HasPrefix(p.Cmd, "hutch-init") && (server.PID == 0 || p.PID < server.PID) {
			server = p
		}
	}
	if server.PID != 0 {
		protected[server.PGID] = true
	}
	count := map[int]int{}
	for _, p := range ps {
		if !protected[p.PGID] {
			count[p.PGID]++
		}
	}
	for g, c := range count {
		if c > n || (c == n && g < pgid) {
			pgid, n = g, c
		}
	}
	return pgid, n
}
