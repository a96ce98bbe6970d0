// Package ratelimit is a set of token buckets by key (a client address, a sandbox ID): each
// key may take rate tokens per second on average and burst at once. A key's bucket starts full.
// The API's per-client limits (internal/server) and the DNS server's per-sandbox query limit
// (internal/egress/dns) are each one Buckets.
package ratelimit

import (
	"sync"
	"time"
)

// Buckets holds one token bucket per key; it is safe for concurrent use.
type Buckets struct {
	rate  float64 // tokens per second
	burst float64
	idle  time.Duration // 0: buckets are kept until Forget

	mu        sync.Mutex
	buckets   map[string]*bucket // guarded by mu
	lastSweep time.Time          // guarded by mu
}

type bucket struct {
	tokens float64
	last   time.Time
}

// New returns buckets of rate tokens per second and burst (at least 1) at once. With idle > 0,
// buckets untouched for idle are forgotten (they behave as new ones, full), checked at most once
// per idle; with 0 they are kept until Forget.
func New(rate float64, burst int, idle time.Duration) *Buckets {
	return &Buckets{rate: rate, burst: float64(max(burst, 1)), idle: idle, buckets: map[string]*bucket{}}
}

// Rate is the tokens per second of each bucket.
func (b *Buckets) Rate() float64 { return b.rate }

// Burst is the size of each bucket.
func (b *Buckets) Burst() float64 { return b.burst }

// Take takes a token from key's bucket at now; when there is none it reports how long until
// one is back.
func (b *Buckets) Take(key string, now time.Time) (ok bool, retryAfter time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.idle > 0 && now.Sub(b.lastSweep) > b.idle {
		b.sweep(now)
	}
	k := b.buckets[key]
	if k == nil {
		k = &bucket{tokens: b.burst, last: now}
		b.buckets[key] = k
	}
	k.tokens = min(b.burst, k.tokens+now.Sub(k.last).Seconds()*b.rate)
	k.last = now
	if k.tokens >= 1 {
		k.tokens--
		return true, 0
	}
	return false, time.Duration((1 - k.tokens) / b.rate * float64(time.Second))
}

// Forget drops key's bucket: its next Take starts a full one.
func (b *Buckets) Forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.buckets, key)
}

// Len is the number of buckets held.
func (b *Buckets) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buckets)
}

// sweep forgets buckets untouched for idle.
func (b *Buckets) sweep(now time.Time) {
	b.lastSweep = now
	for k, v := range b.buckets {
		if now.Sub(v.last) > b.idle {
			delete(b.buckets, k)
		}
	}
}
