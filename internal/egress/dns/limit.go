package dns

import (
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/ratelimit"
)

// Rate limit defaults (EGRESS.md §2.4): per sandbox, queries per second and burst.
const (
	DefaultRate  = 200
	DefaultBurst = 500
)

// limiter is a token bucket per sandbox, kept until the sandbox is forgotten.
type limiter struct {
	buckets *ratelimit.Buckets

	mu sync.Mutex
	// lastNotice throttles limit notifications to one per sandbox per second; guarded by mu.
	lastNotice map[string]time.Time
}

func newLimiter(rate float64, burst int) *limiter {
	return &limiter{buckets: ratelimit.New(rate, burst, 0), lastNotice: map[string]time.Time{}}
}

// allow takes a token for id; when none is left it returns false, and notify is true at most
// once per second per sandbox (for the "limit" audit event).
func (l *limiter) allow(id string, now time.Time) (ok, notify bool) {
	if ok, _ := l.buckets.Take(id, now); ok {
		return true, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastNotice[id]) >= time.Second {
		l.lastNotice[id] = now
		return false, true
	}
	return false, false
}

// forget drops id's bucket.
func (l *limiter) forget(id string) {
	l.buckets.Forget(id)
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.lastNotice, id)
}
