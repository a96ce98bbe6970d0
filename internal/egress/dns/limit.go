package dns

import (
	"sync"
	"time"
)

// Rate limit defaults (EGRESS.md §2.4): per sandbox, queries per second and burst.
const (
	DefaultRate  = 200
	DefaultBurst = 500
)

// limiter is a token bucket per sandbox.
type limiter struct {
	rate  float64
	burst float64

	mu sync.Mutex
	// buckets are keyed by sandbox ID.
	buckets map[string]*bucket
	// lastNotice throttles limit notifications to one per sandbox per second.
	lastNotice map[string]time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(rate float64, burst int) *limiter {
	return &limiter{rate: rate, burst: float64(burst), buckets: map[string]*bucket{}, lastNotice: map[string]time.Time{}}
}

// allow takes a token for id; when none is left it returns false, and notify is true at most
// once per second per sandbox (for the "limit" audit event).
func (l *limiter) allow(id string, now time.Time) (ok, notify bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[id]
	if b == nil {
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[id] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, false
	}
	if now.Sub(l.lastNotice[id]) >= time.Second {
		l.lastNotice[id] = now
		return false, true
	}
	return false, false
}

// forget drops id's bucket.
func (l *limiter) forget(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.buckets, id)
	delete(l.lastNotice, id)
}
