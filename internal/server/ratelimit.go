package server

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// Rate limit defaults: a client (one remote IP address) may start DefaultRate requests per
// second on average and DefaultBurst at once. Generous for SDKs, orchestrators driving many
// sandboxes from one host, and the console, which run many calls in parallel (the e2e suite
// alone passes 100/s); an abuser (or a token guesser) gets 429 RATE_LIMITED. hutchd's
// --api-rate-limit changes it.
const (
	DefaultRate  = 1000.0
	DefaultBurst = 5000
)

// bucketIdle is how long an untouched, full bucket is kept.
const bucketIdle = 10 * time.Minute

// rateLimiter is a token bucket per client. Only the start of a request takes a token: a
// stream that is already open (SSE, a terminal WebSocket, a file download) is never throttled.
type rateLimiter struct {
	rate  float64 // tokens per second
	burst float64

	mu        sync.Mutex
	buckets   map[string]*bucket // guarded by mu
	lastSweep time.Time          // guarded by mu
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newRateLimiter(rate float64, burst int) *rateLimiter {
	return &rateLimiter{rate: rate, burst: float64(burst), buckets: map[string]*bucket{}}
}

// take takes a token for client at now; when none is left it reports how long until one is.
func (l *rateLimiter) take(client string, now time.Time) (ok bool, retryAfter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > bucketIdle {
		l.sweep(now)
	}
	b := l.buckets[client]
	if b == nil {
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[client] = b
	}
	b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// sweep forgets buckets that have been full for a while (they behave as new ones).
func (l *rateLimiter) sweep(now time.Time) {
	l.lastSweep = now
	for k, b := range l.buckets {
		if now.Sub(b.last) > bucketIdle {
			delete(l.buckets, k)
		}
	}
}

// SetRateLimit sets the per-client request rate (requests per second) and burst; rate <= 0
// turns rate limiting off. Call it before serving.
func (s *Server) SetRateLimit(rate float64, burst int) {
	if rate <= 0 {
		s.limiter = nil
		return
	}
	s.limiter = newRateLimiter(rate, max(burst, 1))
}

// allow applies the rate limit to a new request (health checks are exempt) and answers 429
// RATE_LIMITED with Retry-After (whole seconds) when the client is over it.
func (s *Server) allow(w http.ResponseWriter, r *http.Request) bool {
	if s.limiter == nil || r.URL.Path == "/v1/health" {
		return true
	}
	client, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		client = r.RemoteAddr
	}
	ok, wait := s.limiter.take(client, time.Now())
	if ok {
		return true
	}
	secs := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	closeUnread(w)
	writeError(w, r, errdefs.Newf(errdefs.CodeRateLimited, "too many requests from %s: at most %g per second (bursts of %g); retry after %d s", client, s.limiter.rate, s.limiter.burst, secs).
		With("retryAfterSeconds", secs), "")
	return false
}
