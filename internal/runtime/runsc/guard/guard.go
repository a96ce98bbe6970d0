// Package guard is gVisor's memory guard: the host-side backstop of a gVisor sandbox's memory
// limit, and of its process limit and its agent's share of the CPU. Inside, hutchd's agent
// enforces the limit (internal/agent/oom): it reads the usage and kills the process Linux
// would. But the agent is one more task of the Sentry, which schedules its tasks
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
// never below the use inside. So the guard keeps PressureFile at "1" while the host use is
// above the sandbox's own limit (and "0" again once it is 1/16 below it), and the agent reads
// the use inside only then.
//
// A guard kill is reported like an OOM kill: before each kill the guard writes the time in
// KillFile, which the agent compares with the value when a process started (a time, not a
// count: it only grows, across hutchd restarts and memory wakes, which recreate the file).
//
// The files live in the bundle's guard directory, bound read-only at Dir in the sandbox.
package guard

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/hutchdev/hutch/internal/runtime/ocicli"
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// Supervisor runs the memory guards of the containers of one runsc driver, one per running
// container, and serialises their pauses with the runtime's (Pause, Resume). Set OnKill and
// AgentProbe before the first Start.
type Supervisor struct {
	// OnKill, if set, is called after each kill of a guard, from the guard's goroutine; it
	// must not block for long. hutchd records it in its audit log.
	OnKill func(Kill)
	// AgentProbe, if set, asks container id's agent whether it answers (hutchd: a ping of the
	// agent, sandbox.Manager.PingAgent) and returns an error if it does not before ctx ends. The
	// guard calls it while the sandbox uses its whole CPU quota, and kills when the agent does
	// not answer in time (starve.go). Without it the guard has no starved cause.
	AgentProbe func(ctx context.Context, id string) error

	cli   *ocicli.Driver
	root  string                 // runsc's --root, where the control sockets are
	cliID func(id string) string // the ID runsc knows container id by
	log   *slog.Logger
	// guards are the running guards, one per running container.
	guards guards
	// pauseMu serialises Pause, Resume and a guard's pause-list-resume (contain).
	pauseMu sync.Mutex
}

// New returns the supervisor of cli's containers (a runsc driver); log receives the guards'
// lines.
func New(cli *ocicli.Driver, log *slog.Logger) *Supervisor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Supervisor{cli: cli, root: cli.Root(), cliID: cli.CLIID, log: log}
}

// Pause runs `runsc pause` for id to the end whatever ctx does (pauseUncancelled), after any
// guard's pause of id is over (contain).
func (s *Supervisor) Pause(ctx context.Context, id string) error {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	return s.pauseUncancelled(ctx, id)
}

// Resume runs `runsc resume` for id as Pause runs its pause.
func (s *Supervisor) Resume(ctx context.Context, id string) error {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	return s.resumeUncancelled(ctx, id)
}

// Dir is where the memory guard's files are readable inside a gVisor sandbox;
// internal/agent/oom reads them. KillFile holds the Unix time in nanoseconds of the guard's
// last kill ("0": none), CauseFile that kill's cause (guardPass.cause: "memory",
// "processes" or "starved"; written before KillFile), KilledFile the processes that kill
// signals, as PID:PGID pairs separated by spaces (emptied before KillFile is written, filled
// once they are signalled, or before a kill after the resume, which takes longer),
// PressureFile "1" while the host memory use is above the sandbox's limit, else "0".
const (
	Dir          = "/run/hutch-guard"
	KillFile     = Dir + "/last_kill"
	CauseFile    = Dir + "/last_kill_cause"
	KilledFile   = Dir + "/last_kill_processes"
	PressureFile = Dir + "/pressure"
)

// guardLimitFile, in the guard directory, keeps the sandbox's own memory limit (bytes) for a
// guard started for a container a restarted hutchd took over.
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

// SentryPids is the host pids limit of a gVisor sandbox whose processes may hold limit tasks
// (limit > 0): 3×limit + 256. On the host every sandbox task costs the Sentry a thread and
// the platform stub tasks (systrap: about 2.2 host tasks per sleeping process, measured 147
// for 60), and the Sentry has its own Go threads; when the host limit is reached first, the
// Sentry cannot make a thread and the whole sandbox dies. The sandbox's own limit is enforced
// inside, where a fork past it fails with EAGAIN as on runc (RLIMIT_NPROC, see runsc's adapt). The
// host limit still bounds a sandbox that spreads its tasks over several uids (RLIMIT_NPROC
// counts per user): that one loses its Sentry, never a neighbour.
func SentryPids(limit int64) int64 { return 3*limit + 256 }

// SentryMemory is the host memory limit of a gVisor sandbox whose processes may use limit
// bytes (limit > 0) and hold pids tasks: limit + limit/2 + 512 KiB per task + 256 MiB, so that
// the memory guard's trigger (halfway from limit to it) has room for the Sentry's memory of
// half the pids limit's tasks, and a fork bomb room above the trigger. Inside,
// hutchd's agent keeps the processes' memory at or under limit (internal/agent/oom); the host
// cgroup also holds the Sentry's own memory, which grows with the number of tasks (its task
// structures and goroutines, the page tables and kernel stacks of the platform's stub processes:
// measured 2026-11-30 in a lite sandbox, 69 MiB on the host for 31 MiB inside when idle, 210 MiB
// for 70 MiB with 300 sleeping processes, about 0.45 MiB per process), and what a process
// allocates between two polls of the agent. Past guardTrigger of it the memory guard kills; when the host limit is reached all the same, the host's OOM killer takes the
// Sentry and the whole sandbox dies (restarted on the next request), never a neighbour.
// The constant was 128 MiB until a CI run of TestMemoryGuardStopsForkBomb lost its sandbox
// with 256 MiB above the guard's trigger; it is now 320 MiB for lite (host limit 896 MiB).
func SentryMemory(limit, pids int64) int64 { return limit + limit/2 + pids*512<<10 + 256<<20 }

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

// hostDir is the bundle's directory mounted read-only at Dir.
func (s *Supervisor) hostDir(id string) string { return filepath.Join(s.cli.Bundle(id), "guard") }

// Mount is the spec mount of hostDir.
func (s *Supervisor) Mount(id string) specs.Mount {
	return specs.Mount{Destination: Dir, Type: "bind", Source: s.hostDir(id), Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec"}}
}

// Init (re)creates id's guard directory for a sandbox limited to limit bytes.
func (s *Supervisor) Init(id string, limit int64) error {
	if err := os.MkdirAll(s.hostDir(id), 0o755); err != nil {
		return err
	}
	for name, v := range map[string]string{filepath.Base(KillFile): "0", filepath.Base(CauseFile): "", filepath.Base(KilledFile): "", filepath.Base(PressureFile): "0", guardLimitFile: strconv.FormatInt(limit, 10)} {
		if err := s.writeGuardFile(id, name, v); err != nil {
			return err
		}
	}
	return nil
}

// writeGuardFile replaces file name of id's guard directory with v and a newline.
func (s *Supervisor) writeGuardFile(id, name, v string) error {
	dir := s.hostDir(id)
	tmp := filepath.Join(dir, "."+name)
	if err := os.WriteFile(tmp, []byte(v+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// setPressure overwrites the pressure file in place ("0\n" and "1\n" have one length), not by
// a rename: the agent keeps it open and rereads it (oom.Enforcer).
func (s *Supervisor) setPressure(id string, on bool) error {
	f, err := os.OpenFile(filepath.Join(s.hostDir(id), filepath.Base(PressureFile)), os.O_WRONLY, 0)
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

// Start starts id's guard unless it runs already: runsc's Start and Restore do, and Adopt for
// a running container a restarted hutchd took over.
func (s *Supervisor) Start(id string) {
	s.guards.mu.Lock()
	defer s.guards.mu.Unlock()
	if _, ok := s.guards.cancel[id]; ok {
		return
	}
	if s.guards.cancel == nil {
		s.guards.cancel = map[string]context.CancelFunc{}
	}
	ctx, cancel := context.WithCancel(context.Background()) //nolint:forbidigo // the guard lives as long as the container, cancelled at its delete
	s.guards.cancel[id] = cancel
	go func() {
		s.guard(ctx, id)
		s.guards.mu.Lock()
		defer s.guards.mu.Unlock()
		if ctx.Err() == nil { // not replaced by Stop and a new start
			delete(s.guards.cancel, id)
		}
		cancel()
	}()
}

// Stop stops id's guard, if any.
func (s *Supervisor) Stop(id string) {
	s.guards.mu.Lock()
	defer s.guards.mu.Unlock()
	if cancel, ok := s.guards.cancel[id]; ok {
		cancel()
		delete(s.guards.cancel, id)
	}
}

// guard watches id until ctx ends or its cgroup is gone.
func (s *Supervisor) guard(ctx context.Context, id string) {
	dirs := s.cli.CgroupDirs(id)
	usagePath, limitPath, ok := ocispec.MemoryFiles(dirs)
	if !ok {
		return
	}
	limit, err := ocispec.ReadInt(limitPath)
	if err != nil || limit <= 0 || limit >= 1<<62 {
		return // "max" or unlimited: no limit to guard
	}
	// The sandbox's own limit, for the trigger and the pressure signal (0: none).
	own, _ := ocispec.ReadInt(filepath.Join(s.hostDir(id), guardLimitFile))
	trigger := guardTrigger(own, limit)
	tasksPath, tasksHint, minProcs := pidsGuard(dirs)
	p, _ := ocispec.ReadInt(filepath.Join(s.hostDir(id), filepath.Base(PressureFile)))
	pressure := p == 1
	signalled := signalledSet{}
	starve := newStarveWatch(id, dirs, s.AgentProbe)
	defer starve.stop()
	var lastKill, lastStarved, quietUntil, starvedQuiet time.Time
	// starved is set when the starvation watch reported the agent starved, until a pass of
	// cause "starved" took it: a tick that chose another cause (a process count that then
	// finds too few processes to kill) must not lose it.
	starved := false
	// held is the host use a kill left behind while still past the trigger (0: none): the
	// Sentry gives freed memory back to the host gradually, and a held use is no new growth.
	var held int64
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
			if err := s.setPressure(id, pressure); err != nil {
				s.log.Warn("memory guard: pressure file", "sandbox_id", id, "err", err)
			}
		}
		now := time.Now()
		g := guardPass{used: used, trigger: trigger, limit: limit, again: now.Sub(lastKill) < EscalateWindow}
		if used <= trigger {
			held = 0
		}
		if used > trigger && (held == 0 || used > held+heldMargin) {
			g.cause = "memory"
		} else if tasks, err := ocispec.ReadInt(tasksPath); err == nil && tasksHint > 0 && tasks >= tasksHint && now.After(quietUntil) {
			if s.crowded(ctx, id, minProcs, signalled) {
				g.cause, g.minProcs = "processes", minProcs
			} else {
				quietUntil = now.Add(crowdedQuiet)
			}
		}
		// Polled at every tick, to take a probe's answer.
		if starve.poll(ctx, now) && now.After(starvedQuiet) {
			starved = true
		}
		if starved && g.cause == "" {
			g.cause, g.again = "starved", g.again || now.Sub(lastStarved) < starveEscalate
			starved = false
		}
		if g.cause == "" {
			continue
		}
		if !s.contain(ctx, id, usagePath, g, signalled) {
			switch g.cause {
			case "processes":
				quietUntil = time.Now().Add(crowdedQuiet)
			case "starved":
				// Nothing the guard may kill (seen: busy loops in the agent's own group): no
				// pause every 20 s for nothing.
				starvedQuiet = time.Now().Add(starveQuiet)
				starve.reset(time.Now())
			}
			time.Sleep(settleStep) // no line per poll
			continue
		}
		lastKill = time.Now()
		if g.cause == "starved" {
			lastStarved = lastKill
		}
		starve.reset(lastKill) // new evidence for the next starved kill
		starved = false
		quietUntil = lastKill.Add(crowdedQuiet) // the killed processes exit meanwhile
		s.settle(ctx, usagePath, trigger)
		if u, err := ocispec.ReadInt(usagePath); err == nil && u > trigger {
			held = u
		}
	}
}

// The guard's second cause, besides memory: a sandbox near its process limit. A fork bomb of
// shells (bash's `:(){ :|:& };:`) fills the limit with small processes that spin on fork's
// EAGAIN: the host memory stays far under the trigger (220 to 423 MiB in a lite sandbox),
// while the Sentry, which schedules its tasks with no regard for nice values, runs the agent
// too rarely to answer or to end the command at its timeout. Seen: the sandbox
// answered nothing for 14 minutes.
//
// The host cgroup's task count (pids.current) costs nothing to read, but it is only a hint: each
// process of the sandbox is about two host tasks while it lives (its stub process of the
// platform; measured 2.0 per sleeping process, on top of the Sentry's ~60 threads), but the
// platform keeps its stubs for reuse, so the count stays high after the processes are gone (887
// stubs for 4 processes, after a bomb). Past the hint the guard counts the processes outside
// the agent's groups (`runsc ps`, crowded), and kills (contain, cause "processes") when there
// are minProcs or more, half the limit; else it looks again after crowdedQuiet. In a lite
// sandbox (512 pids) a shell bomb, throttled to a sixteenth of a CPU, adds about 5 processes a
// second: the guard kills it about a minute after it started.
const (
	crowdedQuiet = 10 * time.Second
	// heldMargin is how far past the use a kill left behind (held) the memory must grow for
	// the next kill: seen in TestMemoryGuardStopsForkBomb, the host use stayed at 636 MiB,
	// past the trigger, for over 10 s after a bomb died, and the guard's next pass killed the
	// one process left outside PID 1's group.
	heldMargin = 32 << 20
	// EscalateWindow: a kill less than this after the last one means that one did not end
	// the attack (guardPass.again).
	EscalateWindow = 10 * time.Second
)

// sentryThreads is room for the Sentry's own threads in the task count hint (about 60 in an idle
// sandbox): below it, a sandbox with a small pids limit (64 in the runsc tests) would be listed
// every crowdedQuiet for nothing.
const sentryThreads = 128

// pidsGuard returns the host cgroup's task count file of a sandbox in dirs, the count past
// which the guard counts the processes (the sandbox's pids limit plus sentryThreads: half of
// the limit's processes, two host tasks each, and the Sentry's threads) and the processes
// outside the agent's groups a kill needs (half the limit); "", 0, 0 without a pids limit. The sandbox's limit is read
// back from the host's, SentryPids(limit).
func pidsGuard(dirs []string) (tasksPath string, tasksHint int64, minProcs int) {
	for _, d := range dirs {
		hostMax, err := ocispec.ReadInt(filepath.Join(d, "pids.max"))
		if err != nil {
			continue
		}
		limit := (hostMax - 256) / 3
		if limit <= 0 {
			return "", 0, 0
		}
		return filepath.Join(d, "pids.current"), limit + sentryThreads, int(limit / 2)
	}
	return "", 0, 0
}

// crowded reports whether id has minProcs processes or more outside the agent's groups
// (`runsc ps`, while it runs; the processes of signalled left out), or could not be listed (a
// Sentry too busy to answer in 10 s: contain pauses it, lists it again and checks the count
// itself).
func (s *Supervisor) crowded(ctx context.Context, id string, minProcs int, signalled signalledSet) bool {
	ps, err := s.Processes(ctx, id)
	if err != nil {
		return true
	}
	n := 0
	for _, g := range victims(signalled.filter(ps)) {
		n += g.n
	}
	return n >= minProcs
}

// settle waits, after a kill, while the Sentry gives the killed group's memory back to the host
// (it does so gradually: measured ~3 s from 563 MiB to 117 MiB in a lite sandbox), so that a
// second group dies only for memory still growing: it returns when the use is at or under
// trigger, when it stopped falling for half a second, or after settleMax.
func (s *Supervisor) settle(ctx context.Context, usagePath string, trigger int64) {
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
