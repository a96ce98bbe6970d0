package daemon

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/hutchdev/hutch/internal/config"
	"github.com/hutchdev/hutch/internal/connlimit"
	"github.com/hutchdev/hutch/internal/egress/dns"
	"github.com/hutchdev/hutch/internal/egress/proxy"
)

// noFileTarget is the RLIMIT_NOFILE hutchd raises itself to, soft and hard, when it may
// (CAP_SYS_RESOURCE: root has it unless a container manager withheld it), capped by
// fs.nr_open: containerd's and Docker's default. hutchd holds a descriptor per client
// connection, per egress connection and its upstream, per agent connection and per open log,
// so the 1,024 a host may give a service is too few; the connection caps (fdBudget), not this
// limit, are what keep a flood from taking them all.
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

// fdBudget splits hutchd's descriptors, the soft RLIMIT_NOFILE nofile in force after
// raiseNoFile, between the connection caps, so that no flood of connections (from sandboxes
// or from clients) can take the descriptors the rest of hutchd needs:
//
//	egress proxy   nofile/4 connections, two descriptors each (nofile/2), at most proxy.MaxConns
//	egress DNS TCP nofile/64 connections, at most dns.MaxTCPConns
//	API, preview   nofile/8 connections each (nofile/4 together), at most DefaultMaxConns each
//	reserve        the rest, at least nofile/4 - nofile/64: sandbox agents, SQLite, logs,
//	               runtimes, upstream pools, accept(2) of connections closed over a cap
//
// At the 20,000 of a host that withholds CAP_SYS_RESOURCE: 5,000 proxied connections (10,000
// descriptors), 312 DNS, 2,500 + 2,500 client connections, 4,688 descriptors reserved. At
// 1,048,576 the fixed caps apply: 32,768 proxied (65,536 descriptors), 4,096 DNS, 10,000 +
// 10,000 client connections.
type fdBudget struct {
	proxyConns, dnsTCPConns int
	// client are the caps of the API listener and of the preview listener, each its own
	// Limiter: cfg's --max-conns wins over the budget.
	client connlimit.Limits
}

func newFDBudget(cfg config.Config, nofile uint64) fdBudget {
	b := fdBudget{
		proxyConns:  int(min(proxy.MaxConns, max(nofile/4, 1))),
		dnsTCPConns: int(min(dns.MaxTCPConns, max(nofile/64, 1))),
	}
	total := cfg.MaxConns
	if total <= 0 {
		total = int(min(DefaultMaxConns, max(nofile/8, 1)))
	}
	// One preview URL's holder (one sandbox's URLs) may have an eighth of the listener's
	// connections trusted: its visitors' connections past it can be closed for anyone's.
	b.client = connlimit.Limits{PerAddr: max(cfg.MaxConnsPerClient, 0), Total: total, PerKey: max(total/8, 1)}
	return b
}
