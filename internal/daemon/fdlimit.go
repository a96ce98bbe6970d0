package daemon

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/hutchdev/hutch/internal/config"
	"github.com/hutchdev/hutch/internal/connlimit"
)

// noFileTarget is the RLIMIT_NOFILE hutchd raises itself to, soft and hard, when it may
// (CAP_SYS_RESOURCE: root has it unless a container manager withheld it), capped by
// fs.nr_open: containerd's and Docker's default. hutchd holds a descriptor per client
// connection, per egress connection and its upstream, per agent connection and per open log,
// so the 1,024 a host may give a service is too few; the connection caps (clientLimits,
// proxy.MaxConns), not this limit, are what keep a flood from taking them all.
const noFileTarget = 1 << 20

// DefaultMaxConns bounds the default cap of the API and preview listeners' open client
// connections (each listener its own), whatever the fd limit: past it a flood costs memory
// (a goroutine and buffers per connection) sooner than descriptors.
const DefaultMaxConns = 10000

// raiseNoFile raises hutchd's RLIMIT_NOFILE: the hard limit to noFileTarget (or fs.nr_open)
// when it is lower and hutchd may raise it, and the soft limit to the hard one. It returns the
// soft limit in force afterwards.
func raiseNoFile(log *slog.Logger) uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		log.Warn("file descriptor limit unknown", "err", err)
		return 1024
	}
	before := rl
	want := uint64(noFileTarget)
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n < want {
			want = n
		}
	}
	if rl.Max < want {
		// Only CAP_SYS_RESOURCE may raise the hard limit; without it hutchd keeps its own.
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: want, Max: want}); err == nil {
			rl = syscall.Rlimit{Cur: want, Max: want}
		}
	}
	if rl.Cur < rl.Max {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: rl.Max, Max: rl.Max}); err == nil {
			rl.Cur = rl.Max
		}
	}
	log.Info("file descriptor limit", "soft", rl.Cur, "hard", rl.Max, "was_soft", before.Cur, "was_hard", before.Max)
	return rl.Cur
}

// clientLimits are the connection caps of the API listener, and of the preview listener (each
// its own Limiter): cfg's, the total by default DefaultMaxConns or an eighth of the fd limit
// nofile when less, so both listeners together hold at most a quarter of hutchd's descriptors
// and the rest stay for sandbox agents, egress, SQLite and files whatever clients do.
func clientLimits(cfg config.Config, nofile uint64) connlimit.Limits {
	total := cfg.MaxConns
	if total <= 0 {
		total = int(min(DefaultMaxConns, max(nofile/8, 1)))
	}
	return connlimit.Limits{PerAddr: max(cfg.MaxConnsPerClient, 0), Total: total}
}
