package reaper

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestShimDemotesEveryCommand starts many commands under the shim on a busy host and checks
// that each runs at CommandNice with CommandOOMScoreAdj. Linux keeps the nice value per thread
// and a fork copies the forking thread's, so a shim whose goroutine moved to another thread
// between the demotion and the fork started its command at nice 0 (3 of 500 here), and a fork
// bomb so started starved the agent.
func TestShimDemotesEveryCommand(t *testing.T) {
	bin := buildInit(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Busy goroutines keep the CPUs loaded, so the runtime moves goroutines between threads
	// as it does in a loaded sandbox.
	var (
		spinning sync.WaitGroup
		stop     atomic.Bool
	)
	for range 2 * runtime.NumCPU() {
		spinning.Add(1)
		go func() {
			defer spinning.Done()
			for n := 0; !stop.Load(); n++ {
			}
		}()
	}
	defer func() { stop.Store(true); spinning.Wait() }()

	const starts, parallel = 1500, 20
	var (
		mu  sync.Mutex
		bad []string
		wg  sync.WaitGroup
		sem = make(chan struct{}, parallel)
	)
	for i := range starts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out, err := exec.CommandContext(ctx, bin, "shim", "--",
				"/bin/sh", "-c", `cut -d' ' -f19 /proc/$$/stat; cat /proc/$$/oom_score_adj`).Output()
			got := strings.Fields(string(out))
			want := []string{fmt.Sprint(CommandNice), CommandOOMScoreAdj}
			if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
				mu.Lock()
				bad = append(bad, fmt.Sprintf("start %d: nice and oom_score_adj %q, %v; want %q", i, got, err, want))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Errorf("%d of %d commands not demoted:\n%s", len(bad), starts, strings.Join(bad, "\n"))
	}
}
