package runsc

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The guard's third cause: an agent starved of CPU. The Sentry schedules its tasks with no
// regard for nice values, and the sandbox's CPU quota is shared by all of them: in a lite
// sandbox (62 millicpu) each busy process takes as much of it as the agent. Measured with N busy
// loops (`while :; do :; done`) in a lite sandbox, an agent ping through hutchd took 0.3–1.4 s
// for 4, 1.8–4.5 s for 16, 13–35 s for 32, and over a minute for 64; with 200 the agent gave no
// answer for 14 minutes, while memory and process count stayed far under
// the first two causes. Raising the quota to one CPU does not save it: an exec then took 29 s.
//
// So the guard asks the agent (Config.AgentProbe) when the sandbox uses its whole quota: every
// starveCheck it reads the host cgroup's cpu.stat, and when at least 3/4 of the CFS periods
// since the last read were throttled, it probes the agent with a deadline of probeTimeout. After
// starveProbes such probes in a row that ran out of time (an error of another kind, such as a
// sandbox that is stopping, resets the count), the guard kills (contain, cause "starved"): the
// group that used the most CPU (runsc ps's TIME), or every group outside the agent's when the
// last starved kill was less than starveEscalate ago or no group holds half of the processes
// (spread). It raises the CPU quota to one CPU for the pause, list and kill: the Sentry serves
// runsc under the quota, shared with the busy tasks (`runsc ps` took 8–23 s under 200 busy loops
// in a lite sandbox, 0.02–0.3 s with the quota raised). Busy loops do not grow, so the raised
// quota does not let the attack outgrow the pause, unlike a fork bomb's (contain).
//
// The report is kept until a pass of its own can act on it: a tick that chose the process cause,
// which then found too few processes, would drop it, and after a shell fork bomb the platform's
// kept stub processes hold the host task count past its hint, so such ticks come every 10 s. After a pass that found nothing to kill,
// starvation is ignored for starveQuiet, not paused for every 20 s.
//
// A sandbox whose own work keeps its agent from answering for starveProbes × probeTimeout loses
// that work's hungriest process group, as a sandbox past its memory loses a process to the OOM
// killer: a lite sandbox's 1/16 of a CPU fits a few busy processes, not dozens.
const (
	starveCheck    = 2 * time.Second
	probeTimeout   = 10 * time.Second
	starveProbes   = 2
	starveEscalate = 2 * time.Minute
	// starveQuiet is how long the guard ignores a starved agent after a pass that found
	// nothing to kill.
	starveQuiet = time.Minute
)

// starveWatch is the guard's state for the starved cause (poll).
type starveWatch struct {
	id       string
	statPath string                                     // the host cgroup's cpu.stat
	probe    func(ctx context.Context, id string) error // Config.AgentProbe
	// periods and throttled are cpu.stat's counts at the last read.
	periods, throttled int64
	timeout            time.Duration // a probe's deadline: probeTimeout
	next               time.Time     // the next read of cpu.stat
	pending            chan bool     // a probe in flight: true when it ran out of time
	cancel             func()        // the pending probe's
	fails              int           // probes in a row that ran out of time
}

// newStarveWatch returns the starvation watch of container id in cgroup dirs, or nil when
// there is no probe or no cpu.stat.
func newStarveWatch(id string, dirs []string, probe func(context.Context, string) error) *starveWatch {
	if probe == nil {
		return nil
	}
	for _, d := range dirs {
		path := filepath.Join(d, "cpu.stat")
		if periods, throttled, err := readThrottling(path); err == nil {
			return &starveWatch{id: id, statPath: path, probe: probe, periods: periods, throttled: throttled, timeout: probeTimeout}
		}
	}
	return nil
}

// poll is called at each guard tick; it reports true once the agent did not answer
// starveProbes probes in a row (and starts counting again).
func (w *starveWatch) poll(ctx context.Context, now time.Time) bool {
	if w == nil {
		return false
	}
	if w.pending != nil {
		select {
		case timedOut := <-w.pending:
			w.pending, w.cancel = nil, nil
			if !timedOut {
				w.fails = 0
				return false
			}
			w.fails++
			if w.fails >= starveProbes {
				w.fails = 0
				return true
			}
			w.next = time.Time{} // the next probe at the next tick, if still throttled
			return false
		default:
			return false
		}
	}
	if now.Before(w.next) {
		return false
	}
	w.next = now.Add(starveCheck)
	periods, throttled, err := readThrottling(w.statPath)
	if err != nil {
		return false
	}
	dp, dt := periods-w.periods, throttled-w.throttled
	w.periods, w.throttled = periods, throttled
	if dp <= 0 || dt*4 < dp*3 {
		w.fails = 0
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, w.timeout)
	done := make(chan bool, 1)
	w.pending, w.cancel = done, cancel
	go func() {
		defer cancel()
		err := w.probe(pctx, w.id)
		done <- err != nil && errors.Is(pctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	}()
	return false
}

// stop cancels a probe in flight.
func (w *starveWatch) stop() {
	if w != nil && w.cancel != nil {
		w.cancel()
	}
}

// reset forgets the throttling seen so far and a probe's result (after a kill: the next
// decision needs new evidence).
func (w *starveWatch) reset(now time.Time) {
	if w == nil {
		return
	}
	w.stop()
	w.pending, w.cancel, w.fails = nil, nil, 0
	w.periods, w.throttled, _ = readThrottling(w.statPath)
	w.next = now.Add(starveCheck)
}

// readThrottling returns nr_periods and nr_throttled of a cpu.stat file (cgroup v1's cpu
// controller and v2 both have them).
func readThrottling(path string) (periods, throttled int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	found := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), " ")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "nr_periods":
			dst = &periods
		case "nr_throttled":
			dst = &throttled
		default:
			continue
		}
		if *dst, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil {
			return 0, 0, err
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New(path + ": no nr_periods and nr_throttled")
	}
	return periods, throttled, s.Err()
}
