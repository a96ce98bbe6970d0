package server

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/ratelimit"
)

// Rate limit defaults. Requests that present the API token draw from their client's (remote
// IP address's) authenticated bucket: DefaultRate requests per second on average and
// DefaultBurst at once, generous for SDKs, orchestrators driving many sandboxes from one host,
// and the console, which run many calls in parallel (the e2e suite alone passes 100/s).
// hutchd's --api-rate-limit changes it. Every other request (no or a wrong token, a refused
// WebSocket origin, the unauthenticated console files) draws from the client's separate
// unauthenticated bucket, DefaultUnauthRate per second and DefaultUnauthBurst at once: a token
// guesser gets 429 RATE_LIMITED, and since all local clients share 127.0.0.1, a local process
// flooding unauthenticated requests never takes the tokens of the CLI or an SDK.
const (
	DefaultRate        = 1000.0
	DefaultBurst       = 5000
	DefaultUnauthRate  = 20.0
	DefaultUnauthBurst = 100
)

// bucketIdle is how long an untouched, full bucket is kept.
const bucketIdle = 10 * time.Minute

// newRateLimiter returns a token bucket per client. Only the start of a request takes a
// token: a stream that is already open (SSE, a terminal WebSocket, a file download) is never
// throttled.
func newRateLimiter(rate float64, burst int) *ratelimit.Buckets {
	return ratelimit.New(rate, burst, bucketIdle)
}

// allow takes a token from the client's bucket in l (nil: no limit) and answers 429
// RATE_LIMITED with Retry-After (whole seconds) when there is none. kind names the bucket in
// the message ("" or "unauthenticated ").
func (s *Server) allow(w http.ResponseWriter, r *http.Request, l *ratelimit.Buckets, kind string) bool {
	if l == nil {
		return true
	}
	client := clientIP(r)
	ok, wait := l.Take(client, s.now())
	if ok {
		return true
	}
	noteRateLimited(r)
	secs := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	closeUnread(w)
	writeError(w, r, errdefs.Newf(errdefs.CodeRateLimited, "too many %srequests from %s: at most %g per second (bursts of %g); retry after %d s", kind, client, l.Rate(), l.Burst(), secs).
		With("retryAfterSeconds", secs), "")
	return false
}

// allowUnauthenticated applies the unauthenticated bucket to a request that has no valid
// token or needs none (health checks are exempt).
func (s *Server) allowUnauthenticated(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path == "/v1/health" {
		return true
	}
	return s.allow(w, r, s.unauthLimiter, "unauthenticated ")
}

// public wraps a route that needs no token: it draws from the unauthenticated bucket.
func (s *Server) public(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.allowUnauthenticated(w, r) {
			h.ServeHTTP(w, r)
		}
	})
}

// clientIP is the request's remote IP address (RemoteAddr whole when it has no port).
func clientIP(r *http.Request) string {
	client, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return client
}
