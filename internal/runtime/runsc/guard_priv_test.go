package runsc_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/runtime"
	"github.com/hutchdev/hutch/internal/runtime/runsc"
)

// TestMemoryGuardKillsGroup: a process that takes the Sentry past the guard's trigger, with no
// agent inside to stop it, has its process group killed by the memory guard from the host; the
// sandbox (PID 1) keeps running, the kill's time is in GuardKillFile, and GuardPressureFile said
// "1" while the host count was above the sandbox's limit. "adopted": the guard of
// the runtime that started the sandbox is gone (its hutchd exited) and a new runtime took the
// sandbox over (Adopt), as a restarted hutchd does.
func TestMemoryGuardKillsGroup(t *testing.T) {
	for _, adopted := range []bool{false, true} {
		t.Run(map[bool]string{false: "started", true: "adopted"}[adopted], func(t *testing.T) {
			e := newEnv(t)
			ctx := ctxT(t)
			id := newID(t)
			spec := e.spec(t, id)
			spec.Resources.MemoryBytes = 64 << 20
			if _, err := e.rt.Start(ctx, spec); err != nil {
				t.Fatal(err)
			}
			if adopted {
				e.rt.StopGuard(id)
				rt2, err := runsc.New(runsc.Config{Root: filepath.Join(e.dir, "runsc"), BundleDir: filepath.Join(e.dir, "bundles"), CgroupParent: "hutchrtsc"}, slog.New(slog.DiscardHandler))
				if err != nil {
					t.Fatal(err)
				}
				rt2.Adopt(id)
				t.Cleanup(func() { rt2.StopGuard(id) })
			}
			// 4 MiB every 50 ms, up to 400 MiB: past the trigger (3/4 of
			// runsc.SentryMemory(64 MiB, 64): 192 MiB) slowly enough for the guard to act
			// before the host limit.
			// Meanwhile the guard says "1" in the pressure file once the host count passes the
			// sandbox's 64 MiB.
			pressureFile := filepath.Join(e.dir, "bundles", id, "guard", "pressure")
			sawPressure := make(chan bool, 1)
			stop := make(chan struct{})
			go func() {
				for {
					if b, _ := os.ReadFile(pressureFile); string(b) == "1\n" {
						sawPressure <- true
						return
					}
					select {
					case <-stop:
						sawPressure <- false
						return
					case <-time.After(10 * time.Millisecond):
					}
				}
			}()
			before := time.Now().UnixNano()
			code, out := e.exec(t, id, "python3", "-c", `
import time
held = []
for i in range(100):
    held.append(bytearray(4 << 20))
    time.sleep(0.05)
print("survived")
`)
			close(stop)
			if code != 128+9 || strings.Contains(out, "survived") {
				t.Fatalf("the allocation ended with exit %d, %q; want SIGKILL", code, out)
			}
			if !<-sawPressure {
				t.Error("the pressure file never said 1")
			}
			st, err := e.rt.State(ctx, id)
			if err != nil || st.Status != runtime.StatusRunning {
				t.Fatalf("after the guard's kill: %+v, %v; want the sandbox running", st, err)
			}
			code, out = e.exec(t, id, "cat", runsc.GuardKillFile)
			if at, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64); code != 0 || err != nil || at < before || at > time.Now().UnixNano() {
				t.Errorf("guard kill time: exit %d, %q; want the time of the kill", code, out)
			}
		})
	}
}
