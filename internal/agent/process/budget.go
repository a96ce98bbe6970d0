package process

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// The log budget: the agent shares the sandbox's memory limit with the commands, so the log
// buffers of all processes together may hold at most a share of it (LogBudgetShare). Each
// process is granted MinLogBytes per stream at start; past that its buffers grow with their
// output by taking from the budget, and a buffer that cannot take more stops growing: it keeps
// the size it reached and drops older output from then on. A finished process's buffers give
// their memory back once saved to disk (or once the record is removed).

// LogBudgetShare is the part of the sandbox's memory limit that log buffers may hold: 1/4.
const LogBudgetShare = 4

// unlimitedMemory: a cgroup memory limit at or above this is no limit (cgroup v1 writes
// "unlimited" as 2^63 rounded down to a page).
const unlimitedMemory = 1 << 62

// CgroupRoot is where the sandbox's own cgroup is mounted.
const CgroupRoot = "/sys/fs/cgroup"

// MemoryLimit returns the memory limit of the cgroup mounted at root (CgroupRoot in a
// sandbox), in bytes: cgroup v2's memory.max, else cgroup v1's memory/memory.limit_in_bytes.
// ok is false when neither can be read or the limit is "max" or unlimited.
func MemoryLimit(root string) (limit int64, ok bool) {
	for _, path := range []string{filepath.Join(root, "memory.max"), filepath.Join(root, "memory", "memory.limit_in_bytes")} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		v := string(bytes.TrimSpace(b))
		if v == "max" {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n >= unlimitedMemory {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// DefaultLogBudget returns the log budget of an agent in the cgroup mounted at root: its
// memory limit / LogBudgetShare, or 0 (no budget) when it has no memory limit.
func DefaultLogBudget(root string) int64 {
	limit, ok := MemoryLimit(root)
	if !ok {
		return 0
	}
	return limit / LogBudgetShare
}

// budget counts the log buffer bytes taken by all processes against a limit. A nil *budget
// has no limit. Safe for concurrent use.
type budget struct {
	limit int64
	mu    sync.Mutex
	used  int64 // guarded by mu
}

// newBudget returns a budget of limit bytes, or nil for limit ≤ 0 (no limit).
func newBudget(limit int64) *budget {
	if limit <= 0 {
		return nil
	}
	return &budget{limit: limit}
}

// take takes n bytes and reports whether they were available (always true without a limit).
func (b *budget) take(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

// takeUpTo takes up to n bytes, as many as are available, and returns how many it took.
func (b *budget) takeUpTo(n int64) int64 {
	if b == nil || n <= 0 {
		return max(n, 0)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n = max(0, min(n, b.limit-b.used))
	b.used += n
	return n
}

// give returns n bytes taken earlier.
func (b *budget) give(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// available returns the bytes not taken (-1 without a limit).
func (b *budget) available() int64 {
	if b == nil {
		return -1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limit - b.used
}
