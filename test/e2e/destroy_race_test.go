package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
)

// TestOperationsRacingDestroy races in-sandbox operations (exec, exec stream, file write and
// read, process start), many of them in flight, against a destroy of their sandbox: every one
// that fails must fail with SANDBOX_NOT_FOUND, whatever point of the destroy it met (a cancelled
// agent request used to come back as INTERNAL_ERROR "context canceled").
func TestOperationsRacingDestroy(t *testing.T) {
	requireEnv(t)
	parallel(t)
	ops := map[string]func(ctx context.Context, sb *client.Sandbox, i int) error{
		"exec": func(ctx context.Context, sb *client.Sandbox, i int) error {
			_, err := sb.Exec(ctx, "sleep 0.$((RANDOM % 5)); echo hi", nil)
			return err
		},
		"exec stream": func(ctx context.Context, sb *client.Sandbox, i int) error {
			_, err := sb.ExecStreamComplete(ctx, "echo a; sleep 0.$((RANDOM % 5)); echo b", nil, nil, nil)
			return err
		},
		"write file": func(ctx context.Context, sb *client.Sandbox, i int) error {
			return sb.WriteFile(ctx, fmt.Sprintf("/workspace/f%d", i), []byte("data"))
		},
		"read file": func(ctx context.Context, sb *client.Sandbox, i int) error {
			_, err := sb.ReadFile(ctx, "/etc/hostname")
			return err
		},
		"process start": func(ctx context.Context, sb *client.Sandbox, i int) error {
			// The first few stay running into the destroy; the rest end at once. Hundreds of
			// `sleep 30` (three goroutines start them until the destroy, which on a loaded host
			// comes late) filled the lite sandbox's 512 processes, and the execs' forks then
			// failed with EAGAIN, a fault of the test.
			cmd := "sleep 30"
			if i%1000 >= 10 {
				cmd = "true"
			}
			_, err := sb.StartProcess(ctx, cmd, client.ProcessOptions{})
			return err
		},
	}
	const rounds, perOp = 3, 3
	for round := range rounds {
		id := fmt.Sprintf("e2e-destroy-race-%d", round)
		sb, err := d.Client().Sandbox(ctxT(t, 5*time.Minute), id, &client.SandboxOptions{InstanceType: "lite"})
		if err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
		t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
		var wg sync.WaitGroup
		var mu sync.Mutex
		codes := map[string]int{}
		var ok atomic.Int64
		started := make(chan struct{}, len(ops)*perOp)
		for name, op := range ops {
			for i := range perOp {
				wg.Add(1)
				go func() {
					defer wg.Done()
					first := true
					for n := 0; ; n++ {
						ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
						err := op(ctx, sb, i*1000+n)
						cancel()
						if first {
							first = false
							started <- struct{}{}
						}
						if err == nil {
							ok.Add(1)
							continue
						}
						code := errdefs.CodeOf(err)
						mu.Lock()
						codes[string(code)]++
						mu.Unlock()
						if code != errdefs.CodeSandboxNotFound {
							t.Errorf("round %d: %s racing the destroy: %v (code %s); want SANDBOX_NOT_FOUND", round, name, err, code)
						}
						return
					}
				}()
			}
		}
		for range len(ops) * perOp {
			<-started
		}
		if err := sb.Destroy(ctxT(t, 2*time.Minute)); err != nil {
			t.Fatalf("destroy: %v", err)
		}
		wg.Wait()
		keys := make([]string, 0, len(codes))
		for k := range codes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Logf("round %d: %d operations succeeded before the destroy; error codes: %v", round, ok.Load(), codes)
	}
}
