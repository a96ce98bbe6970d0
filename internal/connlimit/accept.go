package connlimit

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Backoff bounds of Retrying: net/http's.
const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// Retrying returns ln with an Accept that fails only once ln is closed (net.ErrClosed): any
// other error (EMFILE and ENFILE when the process or host is out of descriptors, ENOBUFS,
// ENOMEM, ECONNABORTED, a pending network error of the new socket) is logged, at most once
// per LogInterval, and Accept is retried after a backoff doubling from 5 ms to 1 s. An accept
// loop that returned on such an error would stop serving for good: the kernel keeps
// completing handshakes into the listen queue, which fills, and nothing drains it after the
// flood that took the descriptors has gone. name says in the log line which listener it is.
func Retrying(ln net.Listener, name string, log *slog.Logger) net.Listener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &retrying{Listener: ln, name: name, log: log, sleep: time.Sleep, now: time.Now}
}

type retrying struct {
	net.Listener
	name  string
	log   *slog.Logger
	sleep func(time.Duration) // tests set it
	now   func() time.Time    // tests set it

	mu      sync.Mutex
	failed  int       // guarded by mu: accept errors since the last log line
	lastLog time.Time // guarded by mu
}

func (r *retrying) Accept() (net.Conn, error) {
	var backoff time.Duration
	for {
		c, err := r.Listener.Accept()
		if err == nil {
			return c, nil
		}
		if errors.Is(err, net.ErrClosed) {
			return nil, err
		}
		r.note(err)
		backoff = min(max(2*backoff, minAcceptBackoff), maxAcceptBackoff)
		r.sleep(backoff)
	}
}

// note logs err, or counts it into the next line when one was written within LogInterval.
func (r *retrying) note(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed++
	if now := r.now(); now.Sub(r.lastLog) >= LogInterval {
		r.log.Error("accept failed, retrying", "listener", r.name, "err", err, "failures", r.failed)
		r.lastLog, r.failed = now, 0
	}
}
