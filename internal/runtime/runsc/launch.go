package runsc

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/runtime/ocispec"
)

// WaitLaunch waits while a `runsc run` or `runsc restore` of container id that an earlier
// hutchd started is still running (runtime.LaunchWaiter). hutchd's death does not end it: a
// restore killed under hutchd goes on and makes the container seconds later, so recovery must
// see the outcome, not the half-made container. Such commands are found in /proc by their
// argv: this runsc binary, a detached run or restore, and this container's bundle.
func (r *Runtime) WaitLaunch(ctx context.Context, id string) error {
	if err := ocispec.CheckID(id); err != nil {
		return err
	}
	for r.launching(id) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// launching reports whether a process runs `runsc … run|restore --detach … --bundle <id's
// bundle>` with this runtime's binary.
func (r *Runtime) launching(id string) bool {
	bundle := r.bundle(id)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if args[0] != r.cli.Binary() || !slices.Contains(args, "--detach") {
			continue
		}
		if !slices.Contains(args, "run") && !slices.Contains(args, "restore") {
			continue
		}
		if i := slices.Index(args, "--bundle"); i >= 0 && i+1 < len(args) && args[i+1] == bundle {
			return true
		}
	}
	return false
}
