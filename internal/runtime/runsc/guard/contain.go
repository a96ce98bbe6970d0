package guard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// guardPass is what the guard knows when it calls contain.
type guardPass struct {
	// cause is why: "memory" (the host memory use passed the trigger), "processes" (the
	// host's task count passed its hint and runsc listed minProcs processes or more) or
	// "starved" (the agent did not answer while the sandbox used its whole CPU quota,
	// starve.go).
	cause string
	// used, trigger and limit are the host memory use, the guard's trigger and the host limit,
	// in bytes.
	used, trigger, limit int64
	// minProcs is how many processes outside the agent's groups a kill needs (cause
	// "processes": a sandbox of many threads is not a fork bomb).
	minProcs int
	// again is set when the guard's last kill was less than EscalateWindow ago (for cause
	// "starved": its last starved kill less than starveEscalate ago): it did not end the
	// attack, and contain kills every group outside the agent's.
	again bool
}

// spreadMin is the process count from which contain kills every group outside the agent's when
// no group holds half of them (a fork bomb whose processes start sessions of their own).
const spreadMin = 64

// contain kills the process group of id that the guard chooses (g says why), and reports
// whether it killed one.
//
//  1. It pauses the sandbox (`runsc pause`). A pause stops every task between system calls,
//     so the list taken next is complete and no fork is in progress. For cause "memory" it
//     runs under the CPU quota: the Sentry serves the pause under the quota, so under a fork
//     bomb it takes seconds (0.7 to 7.6 s measured on a loaded host), while the bomb grows at
//     its throttled pace (up to 155 MiB). Lifting the quota during the pause makes that worse:
//     the bomb then outgrows it (136 MiB in 0.36 s; a sandbox lost when the quota was lifted
//     after 5 s). For causes "processes" and "starved" the quota is raised to one CPU first
//     (liftCPUQuota): busy loops and a bomb at its process limit do not grow, and the Sentry
//     shares the quota with them (a pause under 128 busy loops ran past pauseMax; 0.3 to 0.9 s
//     with the quota raised).
//  2. It lists the processes (`runsc ps`) and chooses: the largest group outside the agent's
//     (victims; the processes of signalled are left out; for cause "starved" the one with the
//     most CPU time, byCPU), or every such group when g.again,
//     or when there are spreadMin processes or more and no group holds half of them (a bomb
//     whose every child starts a session). It writes KillFile.
//  3. It SIGKILLs the chosen groups while the sandbox is paused, through the Sentry's control
//     socket (SignalGroup: runsc refuses to signal a paused sandbox). Every listed task of a
//     group dies before it runs again, so a bomb forks no more. A group that has no live
//     process (zombies) is passed over for the next.
//  4. It resumes the sandbox.
//
// When the sandbox could not be paused or the control socket is unusable, it kills after the
// resume, as it did before the control socket: with the CPU quota raised to one CPU (the
// Sentry serves runsc under it), in rounds (killGroup), the next group when one does not die;
// in "every group" mode, every group the kill while paused did not reach (remaining).
//
// Measured with a python fork bomb in a lite sandbox on a host with both CPUs busy, 10 runs
// (TestMemoryGuardStopsForkBomb): peaks of 599 to 731 MiB on the host for a trigger of 576 MiB
// and a host limit of 896 MiB; the peak came at the end of the pause each time. Killing after
// the resume, as the guard did before, added up to 165 MiB in the kill's 0.7 s.
//
// A sandbox paused by someone else (a disk capture, internal/sandbox) is left paused and not
// killed: it does not grow. contain holds pauseMu, which Pause and Resume take too, so a
// capture's pause waits for contain's resume instead of being undone by it.
func (s *Supervisor) contain(ctx context.Context, id, usagePath string, g guardPass, signalled signalledSet) bool {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	start := time.Now()
	peak := watchPeak(usagePath, g.used)
	defer peak()
	k := Kill{ID: id, Cause: g.cause, Usage: g.used, Trigger: g.trigger, HostLimit: g.limit}
	phase := func(d *time.Duration) {
		*d = time.Since(start) - k.Pause - k.List - k.Resume
	}
	restore := func() {}
	defer func() { restore() }()
	// Busy tasks and a bomb at its pids limit do not grow: the Sentry may have a CPU for the
	// pause (starve.go; under 128 busy loops a pause at the quota ran past pauseMax).
	lifted := g.cause != "memory"
	if lifted {
		restore = s.liftCPUQuota(id)
	}
	perr := s.pauseUncancelled(ctx, id)
	phase(&k.Pause)
	if errors.Is(perr, errdefs.ErrFailedPrecondition) {
		s.log.Warn("memory guard: over the trigger, but the sandbox is paused or stopped", "sandbox_id", id, "cause", g.cause, "usage", g.used, "err", perr)
		return false
	}
	paused := perr == nil
	ps, err := s.Processes(ctx, id)
	if err == nil {
		ps = signalled.filter(ps)
	}
	groups := victims(ps)
	if g.cause == "starved" {
		byCPU(groups)
	}
	total := processCount(groups)
	all := g.again || spread(groups)
	phase(&k.List)
	ok := err == nil && len(groups) > 0 && total >= g.minProcs
	if ok {
		// Before the kill and the resume, so that the agent's enforcer, which holds off after
		// a guard kill (oom.Enforcer.GuardKill), sees it as soon as it runs again.
		// The cause first: the agent reads it when it sees the new time.
		if err := s.writeGuardFile(id, filepath.Base(CauseFile), g.cause); err != nil {
			s.log.Warn("memory guard: cause file", "sandbox_id", id, "err", err)
		}
		s.writeKilled(id, nil, nil) // the last kill's processes are not this one's
		if err := s.writeGuardFile(id, filepath.Base(KillFile), strconv.FormatInt(time.Now().UnixNano(), 10)); err != nil {
			s.log.Warn("memory guard: kill file", "sandbox_id", id, "err", err)
		}
	}
	var killed []group
	killFailed := ok && !paused // the kill after the resume
	for _, gr := range groups {
		if !ok || !paused {
			break
		}
		kerr := s.SignalGroup(ctx, id, gr.pgid, unix.SIGKILL)
		if kerr != nil && !errors.Is(kerr, ErrGroupGone) {
			s.log.Warn("memory guard: kill while paused", "sandbox_id", id, "pgid", gr.pgid, "err", kerr)
			killFailed = true // the rest after the resume
			break
		}
		signalled.add(ps, gr.pgid)
		if kerr == nil {
			killed = append(killed, gr)
			if !all {
				break
			}
		}
	}
	if len(killed) > 0 {
		s.writeKilled(id, ps, killed)
	}
	if paused {
		if rerr := s.resumeUncancelled(ctx, id); rerr != nil {
			s.log.Error("memory guard: resume after listing", "sandbox_id", id, "err", rerr)
			return false
		}
	}
	phase(&k.Resume)
	if !ok {
		s.log.Warn("memory guard: nothing to kill", "sandbox_id", id, "cause", g.cause, "usage", g.used, "processes", total,
			"needed", g.minProcs, "paused", paused, "pause_err", perr, "err", err)
		return false
	}
	rounds := 1
	switch {
	case killFailed:
		if !lifted {
			restore = s.liftCPUQuota(id)
		}
		// The groups it is about to kill, for the enforcer to wait for during a kill that may
		// take seconds a group (killGroup's rounds); then the ones it killed.
		rest := remaining(groups, signalled, ps)
		if len(rest) > 0 {
			next := rest
			if !all {
				next = rest[:1]
			}
			s.writeKilled(id, ps, append(slices.Clone(killed), next...))
		}
		var more []group
		more, rounds, err = s.killAfterResume(ctx, id, ps, rest, signalled, all)
		killed = append(killed, more...)
		s.writeKilled(id, ps, killed)
	case len(killed) == 0:
		// Every group was found gone while paused (members exiting, zombies): nothing to
		// kill after the resume either.
		rounds = 0
	}
	k.Kill = time.Since(start) - k.Pause - k.List - k.Resume
	k.Groups, k.Rounds, k.Err, k.Peak, k.Processes = len(killed), rounds, err, peak(), processCount(killed)
	if len(killed) > 0 {
		k.PGID = killed[0].pgid
	}
	s.log.Warn("memory guard: killed process groups of a sandbox near its host limits",
		"sandbox_id", id, "cause", g.cause, "pgid", k.PGID, "groups", k.Groups, "processes", k.Processes, "rounds", rounds,
		"paused", paused, "pause_err", perr,
		"pause", k.Pause.Round(time.Millisecond), "list", k.List.Round(time.Millisecond),
		"resume", k.Resume.Round(time.Millisecond), "kill", k.Kill.Round(time.Millisecond),
		"usage", g.used, "peak", k.Peak, "trigger", g.trigger, "host_limit", g.limit, "err", err)
	if s.OnKill != nil {
		s.OnKill(k)
	}
	return true
}

// writeKilled writes to KilledFile the processes of ps in groups, as PID:PGID pairs: the
// agent's enforcer kills nothing while one of them has not exited (oom.Enforcer.GuardKill).
// Processes, not groups: a process that joins a killed group later (setpgid within its
// session, while an unreaped zombie keeps the group) must not prolong the wait.
func (s *Supervisor) writeKilled(id string, ps []Process, groups []group) {
	in := map[int]bool{}
	for _, g := range groups {
		in[g.pgid] = true
	}
	var pairs []string
	for _, p := range ps {
		if in[p.PGID] {
			pairs = append(pairs, strconv.Itoa(p.PID)+":"+strconv.Itoa(p.PGID))
		}
	}
	if err := s.writeGuardFile(id, filepath.Base(KilledFile), strings.Join(pairs, " ")); err != nil {
		s.log.Warn("memory guard: killed processes file", "sandbox_id", id, "err", err)
	}
}

// spread reports whether groups (victims) hold spreadMin processes or more and none holds half
// of them: contain then kills them all.
func spread(groups []group) bool {
	largest := 0
	for _, g := range groups {
		largest = max(largest, g.n)
	}
	total := processCount(groups)
	return total >= spreadMin && largest*2 < total
}

// processCount is the number of processes in groups.
func processCount(groups []group) int {
	n := 0
	for _, g := range groups {
		n += g.n
	}
	return n
}

// remaining returns the groups of groups that the kill while paused did not signal
// (signalled holds their listed processes, in ps): the kill after the resume takes them.
func remaining(groups []group, signalled signalledSet, ps []Process) []group {
	taken := map[int]bool{}
	for _, p := range ps {
		if signalled[p.PID] {
			taken[p.PGID] = true
		}
	}
	var out []group
	for _, g := range groups {
		if !taken[g.pgid] {
			out = append(out, g)
		}
	}
	return out
}

// killAfterResume kills the first of groups (ps's), or every one of them when all, in rounds
// (killGroup) after the resume: for a sandbox that could not be paused or whose control socket
// is unusable. A group that took no signal had no live process left: its members exited, or are
// zombies that PID 1 has not reaped yet (runsc ps lists them; seen after the guard killed a
// decoy group of 260 sleeping processes, whose zombies it then chose again while a fork bomb in
// another group grew). A group still there after killGroupMax does not die: zombies whose
// parent lives on, which runsc signals without an error. The next group then, up to
// maxSkippedGroups. rounds is the signals of the last group that took one.
func (s *Supervisor) killAfterResume(ctx context.Context, id string, ps []Process, groups []group, signalled signalledSet, all bool) (killed []group, rounds int, err error) {
	for i, gr := range groups {
		n, gone, kerr := s.killGroup(ctx, id, gr.pgid)
		signalled.add(ps, gr.pgid)
		if n > 0 {
			rounds = n
			if !all {
				killed = killed[:0]
			}
			killed = append(killed, gr)
		}
		if kerr != nil {
			err = kerr
		}
		if all {
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if (n > 0 && gone) || kerr != nil || i >= maxSkippedGroups {
			break
		}
	}
	return killed, rounds, err
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
func (s signalledSet) filter(ps []Process) []Process {
	listed := make(map[int]bool, len(ps))
	var out []Process
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
func (s signalledSet) add(ps []Process, pgid int) {
	for _, p := range ps {
		if p.PGID == pgid {
			s[p.PID] = true
		}
	}
}

// Kill describes a memory guard's kill (Supervisor.OnKill) in container ID, for Cause
// ("memory" or "processes", guardPass): of Groups process groups, the largest PGID, holding
// Processes processes when listed, in Rounds SIGKILLs (1: while paused), when the host cgroup's
// memory use was Usage bytes, of a Trigger and a limit of HostLimit. Peak is the highest use
// sampled (every 10 ms) from then to the last round. Pause, List, Resume and Kill are how long
// contain's steps took (Pause and Resume about 0 when the sandbox was not paused). Err is the
// last refusal of a kill other than the group's absence, if any.
type Kill struct {
	ID, Cause                       string
	PGID, Groups, Processes, Rounds int
	Usage, Peak, Trigger            int64
	HostLimit                       int64
	Pause, List, Resume, Kill       time.Duration
	Err                             error
}

// pauseUncancelled and resumeUncancelled run `runsc pause` and `runsc resume` to the end,
// whatever ctx does (bounded by pauseMax). runsc records the new state only after the Sentry
// answered: a pause cut short can leave the Sentry paused with runsc's state "running", and
// since the Sentry counts pauses, no later resume (refused: "not paused") nor a second pause
// and its resume would then restart the tasks. Seen: a guard's pause past a 3 s timeout,
// retried, left a sandbox's tasks stopped for good.
func (s *Supervisor) pauseUncancelled(ctx context.Context, id string) error {
	return s.runUncancelled(ctx, id, "pause")
}

func (s *Supervisor) resumeUncancelled(ctx context.Context, id string) error {
	return s.runUncancelled(ctx, id, "resume")
}

// runUncancelled runs `runsc OP id.` to its end whatever ctx does, bounded by pauseMax.
func (s *Supervisor) runUncancelled(ctx context.Context, id, op string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pauseMax)
	defer cancel()
	_, err := s.cli.Run(ctx, op, id, op, s.cliID(id))
	return err
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
// control socket (SignalGroup), else with `runsc kill`. err is the last refusal other than the
// group's absence, or ctx's.
func (s *Supervisor) killGroup(ctx context.Context, id string, pgid int) (rounds int, gone bool, err error) {
	control := true
	deadline := time.Now().Add(killGroupMax)
	for ctx.Err() == nil {
		kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var kerr error
		if control {
			kerr = s.SignalGroup(kctx, id, pgid, unix.SIGKILL)
			if errors.Is(kerr, errNoControl) {
				s.log.Warn("memory guard: control socket, using runsc kill", "sandbox_id", id, "err", kerr)
				control = false
			}
		}
		if !control {
			_, kerr = s.cli.Run(kctx, "kill", id, "kill", "--pgid", strconv.Itoa(pgid), s.cliID(id), "KILL")
		}
		cancel()
		if kerr != nil {
			// "… process group", or a group of only exiting members
			if errors.Is(kerr, ErrGroupGone) || strings.Contains(kerr.Error(), "no such process") {
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

// Process is a process of `runsc ps` (gVisor's control.Process).
type Process struct {
	PID, PPID, PGID int
	// CPU is the process's CPU time so far (TIME; 0 when runsc printed none it could parse).
	CPU time.Duration
	Cmd string
}

// Processes returns id's processes (`runsc ps`), zombies included.
func (s *Supervisor) Processes(ctx context.Context, id string) ([]Process, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The table: `--format json` lists PIDs only, as runc's does.
	out, err := s.cli.Run(ctx, "ps", id, "ps", s.cliID(id))
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
// line per process; lines of fewer than 9 fields (a name's part after a newline) are skipped.
func parsePS(out []byte) ([]Process, error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if h := strings.Fields(lines[0]); len(h) < 9 || h[1] != "PID" || h[2] != "PPID" || h[3] != "PGID" || h[8] != "CMD" {
		return nil, fmt.Errorf("unexpected header %q", lines[0])
	}
	var ps []Process
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 9 {
			// The rest of a command name with a newline in it (runsc prints the executable's
			// base name, up to 15 bytes: too short for the 9 fields of a line of its own).
			// Failing the whole table on it would keep the guard from killing.
			continue
		}
		var p Process
		var err error
		for i, dst := range []*int{&p.PID, &p.PPID, &p.PGID} {
			if *dst, err = strconv.Atoi(f[1+i]); err != nil {
				return nil, fmt.Errorf("unexpected line %q", l)
			}
		}
		p.CPU, _ = time.ParseDuration(f[7]) // a Go duration: "10ms", "1m2.5s"
		p.Cmd = strings.Join(f[8:], " ")
		ps = append(ps, p)
	}
	return ps, nil
}

// group is a process group of a sandbox, how many processes runsc lists in it and their CPU
// time.
type group struct {
	pgid, n int
	cpu     time.Duration
}

// victims returns the process groups of ps the guard may kill, the largest first (a tie goes
// to the lower group ID). Protected are PID 1's group and the agent server's: the first
// hutch-init child of PID 1 (the lowest PID; PID 1 starts it before any command runs, so a
// process that names itself hutch-init and is reparented to PID 1 later has a higher one).
func victims(ps []Process) []group {
	protected := map[int]bool{0: true}
	server := Process{}
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
	byID := map[int]*group{}
	for _, p := range ps {
		if protected[p.PGID] {
			continue
		}
		g := byID[p.PGID]
		if g == nil {
			g = &group{pgid: p.PGID}
			byID[p.PGID] = g
		}
		g.n++
		g.cpu += p.CPU
	}
	gs := make([]group, 0, len(byID))
	for _, g := range byID {
		gs = append(gs, *g)
	}
	slices.SortFunc(gs, func(a, b group) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return a.pgid - b.pgid
	})
	return gs
}

// pickGroup returns the largest process group of ps the guard may kill (victims) and its size
// (0, 0: none).
func pickGroup(ps []Process) (pgid, n int) {
	if gs := victims(ps); len(gs) > 0 {
		return gs[0].pgid, gs[0].n
	}
	return 0, 0
}

// byCPU orders groups (victims) by their CPU time, the most first (a tie keeps victims' order):
// for an agent starved of CPU, the hungriest group goes first, not a decoy of many sleeping
// processes.
func byCPU(groups []group) {
	slices.SortStableFunc(groups, func(a, b group) int { return cmp.Compare(b.cpu, a.cpu) })
}
