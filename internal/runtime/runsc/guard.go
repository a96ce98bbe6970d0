package runsc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// The memory guard is the host-side backstop of a gVisor sandbox's memory limit. Inside,
// hutchd's agent enforces the limit (internal/agent/oom): it reads the usage and kills the
// process Linux would. But the agent is one more task of the Sentry, which schedules its tasks
// with no regard for nice values: under hundreds of busy tasks (a fork bomb) in a sandbox of a
// sixteenth of a CPU the agent runs too rarely to act, the Sentry's memory reaches the host
// cgroup's limit (SentryMemory) and the host's OOM killer ends the whole sandbox. The guard
// runs in hutchd, outside the sandbox's CPU limit: it polls the host cgroup's memory use every
// guardInterval and, past guardTrigger, kills through runsc's control channel (which needs no
// task of the sandbox to run) the process group with the most processes, never the agent's.
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
)

// guardTrigger is the host memory use past which the guard kills, for a host limit (bytes):
// 3/4 of it. The agent keeps the sandbox's processes under their own limit, which SentryMemory
// puts below that with room for the Sentry's memory of a few hundred tasks, so the guard acts
// only when the agent could not or the Sentry's own memory grew with very many tasks. The
// quarter above it is what a fork bomb may still take while the guard lists and kills (under
// load `runsc ps` and `runsc kill` take seconds; a lite sandbox's bomb grew ~25 MB/s).
func guardTrigger(hostLimit int64) int64 { return hostLimit - hostLimit/4 }

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
	trigger := guardTrigger(limit)
	// The sandbox's own limit, for the pressure signal (0: none).
	own, _ := ocispec.ReadInt(filepath.Join(r.guardDir(id), guardLimitFile))
	p, _ := ocispec.ReadInt(filepath.Join(r.guardDir(id), filepath.Base(GuardPressureFile)))
	pressure := p == 1
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
		restore := r.liftCPUQuota(id)
		pgid, n, err := r.largestGroup(ctx, id)
		if err != nil || pgid == 0 {
			restore()
			r.log.Warn("memory guard: over the trigger and nothing to kill", "id", id, "usage", used, "trigger", trigger, "err", err)
			time.Sleep(settleStep) // no line per poll
			continue
		}
		if err := r.writeGuardFile(id, filepath.Base(GuardKillFile), time.Now().UnixNano()); err != nil {
			r.log.Warn("memory guard: kill file", "id", id, "err", err)
		}
		rounds, err := r.killGroup(ctx, id, pgid)
		restore()
		r.log.Warn("memory guard: killed a process group of a sandbox near its host memory limit",
			"id", id, "pgid", pgid, "processes", n, "rounds", rounds, "usage", used, "trigger", trigger, "host_limit", limit, "err", err)
		r.settle(ctx, usagePath, trigger)
	}
}

// liftCPUQuota removes id's CPU quota (cgroup v1 cpu.cfs_quota_us -1, v2 cpu.max "max") and
// returns the function that puts it back. runsc's control channel is served by the Sentry,
// which is throttled by that quota as a whole: in a lite sandbox (a sixteenth of a CPU) busy
// with a fork bomb, `runsc kill` outlasted a 10 s timeout. While the quota is lifted the
// sandbox still gets only its cpu.shares' part of a busy host.
func (r *Runtime) liftCPUQuota(id string) (restore func()) {
	for _, dir := range r.spec.CgroupDirs(id) {
		for _, c := range []struct{ file, lifted string }{{"cpu.cfs_quota_us", "-1"}, {"cpu.max", "max"}} {
			path := filepath.Join(dir, c.file)
			old, err := os.ReadFile(path)
			if err != nil {
				continue
			}
			if c.file == "cpu.max" { // "QUOTA PERIOD": keep the period
				if f := strings.Fields(string(old)); len(f) == 2 {
					c.lifted = "max " + f[1]
				}
			}
			if err := os.WriteFile(path, []byte(c.lifted), 0); err != nil {
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

// killGroupRounds bounds the SIGKILLs killGroup sends to one group.
const killGroupRounds = 20

// killGroup SIGKILLs process group pgid of id until the group is gone (runsc refuses the
// signal: "no such process group", or "no such process" for a group whose members are all
// exiting), at most killGroupRounds times, and returns how many
// signals reached it. One is not enough for a fork bomb: gVisor signals the group's members
// one by one, and a member's fork in progress completes with a child that got no signal
// (measured: 158 processes killed, 165 in the same group 1.8 s later). err is the last
// refusal other than the group's absence, or ctx's.
func (r *Runtime) killGroup(ctx context.Context, id string, pgid int) (rounds int, err error) {
	for rounds < killGroupRounds && ctx.Err() == nil {
		kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, kerr := r.runSimple(kctx, "kill", id, "kill", "--pgid", strconv.Itoa(pgid), runscID(id), "KILL")
		cancel()
		if kerr != nil {
			if strings.Contains(kerr.Error(), "no such process") { // "… process group", or a group of only exiting members
				return rounds, nil
			}
			return rounds, kerr
		}
		rounds++
	}
	return rounds, ctx.Err()
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

// largestGroup returns the process group of id with the most processes, and its size; the
// groups of PID 1 and of the agent's server are never chosen (pickGroup).
func (r *Runtime) largestGroup(ctx context.Context, id string) (pgid, n int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The table: `--format json` lists PIDs only, as runc's does.
	out, err := r.runSimple(ctx, "ps", id, "ps", runscID(id))
	if err != nil {
		return 0, 0, err
	}
	ps, err := parsePS(out)
	if err != nil {
		return 0, 0, fmt.Errorf("runsc ps %s: %w", id, err)
	}
	return pickGroup(ps)
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

// pickGroup is largestGroup's choice among ps. Protected are PID 1's group and the agent
// server's: the first hutch-init child of PID 1 (the lowest PID; PID 1 starts it before any
// command runs, so a process that names itself hutch-init and is reparented to PID 1 later
// has a higher one).
func pickGroup(ps []psEntry) (pgid, n int, err error) {
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
	return pgid, n, nil
}
