package guard

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/testutil"
)

// TestByCPU: for a starved agent the group with the most CPU time goes first, however few its
// processes; groups of equal time keep victims' order (the largest first).
func TestByCPU(t *testing.T) {
	ps := []Process{
		{PID: 1, PGID: 1, CPU: time.Hour, Cmd: "hutch-init"},
		{PID: 7, PPID: 1, PGID: 7, CPU: time.Hour, Cmd: "hutch-init"},
		// a decoy: many sleeping processes
		{PID: 20, PPID: 7, PGID: 20, CPU: 10 * time.Millisecond, Cmd: "sleep"},
		{PID: 21, PPID: 20, PGID: 20, CPU: 10 * time.Millisecond, Cmd: "sleep"},
		{PID: 22, PPID: 20, PGID: 20, CPU: 10 * time.Millisecond, Cmd: "sleep"},
		// the busy ones
		{PID: 30, PPID: 7, PGID: 30, CPU: 2 * time.Second, Cmd: "bash"},
		{PID: 31, PPID: 30, PGID: 30, CPU: 3 * time.Second, Cmd: "bash"},
		{PID: 40, PPID: 7, PGID: 40, Cmd: "a"},
		{PID: 50, PPID: 7, PGID: 50, Cmd: "b"},
		{PID: 51, PPID: 50, PGID: 50, Cmd: "b"},
	}
	gs := victims(ps)
	byCPU(gs)
	want := []group{{pgid: 30, n: 2, cpu: 5 * time.Second}, {pgid: 20, n: 3, cpu: 30 * time.Millisecond}, {pgid: 50, n: 2}, {pgid: 40, n: 1}}
	if !slices.Equal(gs, want) {
		t.Errorf("byCPU(victims) = %+v, want %+v", gs, want)
	}
}

// TestRemaining: the kill after the resume takes the groups the kill while paused did not
// signal, in their order.
func TestRemaining(t *testing.T) {
	ps := []Process{{PID: 20, PGID: 20}, {PID: 21, PGID: 20}, {PID: 30, PGID: 30}, {PID: 40, PGID: 40}}
	groups := []group{{pgid: 20, n: 2}, {pgid: 30, n: 1}, {pgid: 40, n: 1}}
	s := signalledSet{}
	if got := remaining(groups, s, ps); !slices.Equal(got, groups) {
		t.Errorf("nothing signalled: remaining = %v, want %v", got, groups)
	}
	s.add(ps, 20)
	s.add(ps, 40)
	if got, want := remaining(groups, s, ps), []group{{pgid: 30, n: 1}}; !slices.Equal(got, want) {
		t.Errorf("20 and 40 signalled: remaining = %v, want %v", got, want)
	}
}

func TestReadThrottling(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content      string
		periods, throttled int64
		ok                 bool
	}{
		{"cgroup v1", "nr_periods 86\nnr_throttled 74\nthrottled_time 10220360572\nnr_bursts 0\nburst_time 0\n", 86, 74, true},
		{"cgroup v2", "usage_usec 1000\nuser_usec 600\nsystem_usec 400\nnr_periods 10\nnr_throttled 2\nthrottled_usec 5\n", 10, 2, true},
		{"no quota counts", "usage_usec 1000\n", 0, 0, false},
		{"not a number", "nr_periods x\nnr_throttled 1\n", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			p, th, err := readThrottling(path)
			if (err == nil) != tc.ok || p != tc.periods || th != tc.throttled {
				t.Errorf("readThrottling = %d, %d, %v; want %d, %d, ok %v", p, th, err, tc.periods, tc.throttled, tc.ok)
			}
		})
	}
}

// TestStarveWatch drives poll with a cpu.stat file and a probe of the test's making: the agent
// counts as starved only after starveProbes probes in a row that ran out of time, each taken
// while at least 3/4 of the CFS periods were throttled; an answer, a probe error of another
// kind or a sandbox under its quota starts the count again.
func TestStarveWatch(t *testing.T) {
	type step struct {
		periods, throttled int64  // cpu.stat now (cumulative)
		probe              string // what the probe started at this step does: "answer", "hang", "fail"
		want               bool   // poll's result once the probe ended
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"two probes out of time", []step{{100, 90, "hang", false}, {200, 190, "hang", true}}},
		{"an answer between", []step{{100, 90, "hang", false}, {200, 190, "answer", false}, {300, 290, "hang", false}, {400, 390, "hang", true}}},
		{"under the quota: no probe", []step{{100, 90, "hang", false}, {200, 120, "", false}, {300, 210, "hang", false}, {400, 310, "hang", true}}},
		{"idle: no periods, no probe", []step{{0, 0, "", false}, {0, 0, "", false}}},
		{"an error is not starvation", []step{{100, 90, "fail", false}, {200, 190, "fail", false}, {300, 290, "fail", false}}},
		{"the count starts again after starved", []step{{100, 90, "hang", false}, {200, 190, "hang", true}, {300, 290, "hang", false}, {400, 390, "hang", true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stat := filepath.Join(t.TempDir(), "cpu.stat")
			write := func(p, th int64) {
				if err := os.WriteFile(stat, []byte(fmt.Sprintf("nr_periods %d\nnr_throttled %d\nthrottled_time 0\n", p, th)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write(0, 0)
			behaviour := make(chan string, 1)
			probes := 0
			probe := func(ctx context.Context, id string) error {
				probes++
				switch <-behaviour {
				case "hang":
					<-ctx.Done()
					return ctx.Err()
				case "fail":
					return fmt.Errorf("connection refused")
				}
				return nil
			}
			w := newStarveWatch("sb", []string{t.TempDir(), filepath.Dir(stat)}, probe)
			if w == nil {
				t.Fatal("no watch for a cgroup with cpu.stat")
			}
			w.timeout = 50 * time.Millisecond
			ctx := context.Background()
			now := time.Now()
			wantProbes := 0
			for i, st := range tc.steps {
				write(st.periods, st.throttled)
				now = now.Add(starveCheck)
				if st.probe != "" {
					behaviour <- st.probe
					wantProbes++
				}
				if w.poll(ctx, now) {
					t.Fatalf("step %d: starved when the probe had just started", i)
				}
				if st.probe == "" {
					if w.pending != nil {
						t.Fatalf("step %d: a probe started at %d of %d periods throttled", i, st.throttled, st.periods)
					}
					continue
				}
				if w.pending == nil {
					t.Fatalf("step %d: no probe at %d of %d periods throttled", i, st.throttled, st.periods)
				}
				var got bool
				if !testutil.Poll(t, 20*time.Millisecond, 10*time.Second, func() bool { got = w.poll(ctx, now); return w.pending == nil }) {
					t.Fatalf("step %d: the probe never ended", i)
				}
				if got != st.want {
					t.Fatalf("step %d (%s): starved = %v, want %v", i, st.probe, got, st.want)
				}
			}
			if probes != wantProbes {
				t.Errorf("%d probes, want %d", probes, wantProbes)
			}
		})
	}
	if newStarveWatch("sb", []string{t.TempDir()}, func(context.Context, string) error { return nil }) != nil {
		t.Error("a watch without cpu.stat")
	}
	if newStarveWatch("sb", nil, nil) != nil {
		t.Error("a watch without a probe")
	}
}
