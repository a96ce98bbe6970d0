// Package server is hutchd's public HTTP API (/v1, contract in api/openapi.yaml): bearer-token
// authentication, the JSON error envelope (errdefs is the one place codes get their status),
// sandbox lifecycle handlers, and the forwarding of in-sandbox operations to each sandbox's
// agent over its unix socket.
package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agentapi"
	"github.com/hutchdev/hutch/internal/connlimit"
	"github.com/hutchdev/hutch/internal/ratelimit"
	"github.com/hutchdev/hutch/internal/sandbox"
)

// MaxJSONBody is the largest JSON request body accepted, in bytes: a 32 MiB file as base64 plus
// room for the rest of the request. It bounds the body of every authenticated route but the
// streamed file upload (see bodyLimit).
const MaxJSONBody = 48 << 20

// DefaultMaxUpload is the largest body of the streamed file upload, PUT
// /v1/sandboxes/{id}/files, in bytes: 20 GB, the disk of the largest instance type
// (standard-4), so no upload that could fit in a sandbox is refused. Deps.MaxUpload changes it.
const DefaultMaxUpload = 20 * 1000 * 1000 * 1000

// uploadPattern is the route of the streamed file upload.
const uploadPattern = "PUT /v1/sandboxes/{id}/files"

// Images is what the API needs of the image store.
type Images interface {
	List(ctx context.Context) ([]ImageInfo, error)
	Build(ctx context.Context, name string, progress io.Writer) (ImageInfo, error)
}

// ImageInfo is an image's public view.
type ImageInfo struct {
	ID        string
	Name      string
	Packages  []string
	CreatedAt time.Time
	SizeBytes int64
}

// Server serves the /v1 API.
type Server struct {
	log     *slog.Logger
	mgr     *sandbox.Manager
	images  Images
	ports   Ports
	backups Backups // nil: backups are not available
	// snapshots is nil when snapshots are not available.
	snapshots Snapshots
	version   string
	mux       *http.ServeMux

	closing     chan struct{} // closed by CloseStreams
	closingOnce sync.Once

	// secrets is nil when /v1/secrets is not available.
	secrets Secrets
	// egressCA serves a sandbox's egress CA certificate; nil: not available.
	egressCA EgressCA
	// egress keeps sandboxes' egress policies; nil: not available.
	egress EgressPolicies
	// tokenSum is the SHA-256 of the API token: the plaintext is not kept (see auth).
	tokenSum [sha256.Size]byte
	limiter  *ratelimit.Buckets // per-client rate of authenticated requests (ratelimit.go); nil: off
	// unauthLimiter is the per-client rate of requests without a valid token; nil: off.
	unauthLimiter *ratelimit.Buckets
	audit         *slog.Logger     // lifecycle decisions (audit.go); nil: not recorded
	maxUpload     int64            // bytes; the body bound of uploadPattern (Deps.MaxUpload)
	now           func() time.Time // the rate limits' clock (Deps.Now)
	patterns      []string         // every registered route pattern, in order (handle)
}

// Deps are what the Server serves. A nil optional service turns its routes into 501
// NOT_IMPLEMENTED (or, for the console, leaves /console unrouted).
type Deps struct {
	// Token is the bearer token every /v1 call (except health) must carry. TokenSum, when not
	// zero, is its SHA-256 instead, for hutchd's hash-only mode, where the plaintext token is
	// never on the host (token.LoadHash); the plaintext is never kept either way (see auth).
	Token    string
	TokenSum [sha256.Size]byte
	Manager  *sandbox.Manager
	Images   Images
	// Ports serves /v1/sandboxes/{id}/ports.
	Ports   Ports
	Version string

	// Optional services: backup routes; snapshot routes and creating sandboxes from
	// snapshots; /v1/secrets; GET …/egress/ca.pem; the egress policy API and the "egress"
	// field of POST /v1/sandboxes.
	Backups        Backups
	Snapshots      Snapshots
	Secrets        Secrets
	EgressCA       EgressCA
	EgressPolicies EgressPolicies
	// Console is the web console handler (internal/console), served at /console/ and
	// /console without authentication (see console).
	Console http.Handler
	// AuditLog receives the audit records of lifecycle requests (see recordAudit); nil: none.
	AuditLog *slog.Logger

	// RateLimit is the per-client rate of authenticated requests (nil: DefaultRate and
	// DefaultBurst); a Rate <= 0 turns rate limiting off for authenticated and
	// unauthenticated requests alike. UnauthenticatedRateLimit is the per-client rate of
	// requests without a valid token (nil: DefaultUnauthRate, DefaultUnauthBurst); a Rate <= 0
	// turns that limit off.
	RateLimit, UnauthenticatedRateLimit *RateLimit
	// MaxUpload is the largest body of the streamed file upload (PUT …/files), in bytes; <= 0:
	// DefaultMaxUpload.
	MaxUpload int64
	// Now is the rate limits' clock; nil: time.Now.
	Now func() time.Time
}

// RateLimit is a token bucket's rate (requests per second) and burst.
type RateLimit struct {
	Rate  float64
	Burst int
}

// New returns a Server over d.
func New(log *slog.Logger, d Deps) *Server {
	s := &Server{log: log, tokenSum: sha256.Sum256([]byte(d.Token)), mgr: d.Manager, images: d.Images, ports: d.Ports, version: d.Version, mux: http.NewServeMux(),
		closing: make(chan struct{}), limiter: newRateLimiter(DefaultRate, DefaultBurst), maxUpload: DefaultMaxUpload, now: time.Now,
		unauthLimiter: newRateLimiter(DefaultUnauthRate, DefaultUnauthBurst),
		backups:       d.Backups, snapshots: d.Snapshots, secrets: d.Secrets, egressCA: d.EgressCA, egress: d.EgressPolicies, audit: d.AuditLog}
	if d.TokenSum != ([sha256.Size]byte{}) {
		s.tokenSum = d.TokenSum
	}
	if d.MaxUpload > 0 {
		s.maxUpload = d.MaxUpload
	}
	if d.Now != nil {
		s.now = d.Now
	}
	if l := d.UnauthenticatedRateLimit; l != nil {
		s.unauthLimiter = nil
		if l.Rate > 0 {
			s.unauthLimiter = newRateLimiter(l.Rate, l.Burst)
		}
	}
	if l := d.RateLimit; l != nil {
		if l.Rate <= 0 {
			s.limiter, s.unauthLimiter = nil, nil
		} else {
			s.limiter = newRateLimiter(l.Rate, l.Burst)
		}
	}
	s.routes()
	if d.Console != nil {
		s.console(d.Console)
	}
	return s
}

// bodyLimit is the most bytes of request body r's route accepts: maxUpload for the streamed
// upload, MaxJSONBody for every other route.
func (s *Server) bodyLimit(r *http.Request) int64 {
	if r.Pattern == uploadPattern {
		return s.maxUpload
	}
	return MaxJSONBody
}

// tooLarge is the REQUEST_TOO_LARGE error of a body over limit bytes.
func tooLarge(limit int64) error {
	return errdefs.Newf(errdefs.CodeRequestTooLarge, "request body is over %d bytes; stream large files with PUT .../files", limit).With("limit", limit)
}

// CloseStreams ends the connections the server has taken over from net/http (terminal
// WebSockets) with a proper close frame (1001 going away), so clients see a clean end and
// reconnect; http.Server.Shutdown does not reach them. Register it with RegisterOnShutdown.
func (s *Server) CloseStreams() { s.closingOnce.Do(func() { close(s.closing) }) }

// handle registers h at pattern and remembers the pattern: tests walk every route.
func (s *Server) handle(pattern string, h http.Handler) {
	s.patterns = append(s.patterns, pattern)
	s.mux.Handle(pattern, h)
}

// routes registers a handler for every route of v1.Routes: hutchd's own from handlers, the
// Forwarded ones as relays to the agent; then a 405 with the allowed methods for every other
// method on a known path, and a 404 for everything else.
func (s *Server) routes() {
	// Browsers ask for it on every console page; nothing to serve, nothing to authenticate.
	s.handle("GET /favicon.ico", s.public(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })))
	handlers := s.handlers()
	allowed := map[string][]string{}
	for _, rt := range v1.Routes {
		allowed[rt.Pattern] = append(allowed[rt.Pattern], rt.Method)
		if rt.Forwarded {
			s.handle(rt.Method+" "+rt.Pattern, s.auth(s.forward(agentapi.Public(rt.OperationID))))
			continue
		}
		h, ok := handlers[rt.OperationID]
		if !ok {
			panic("server: no handler for " + rt.OperationID)
		}
		delete(handlers, rt.OperationID)
		s.handle(rt.Method+" "+rt.Pattern, h)
	}
	if len(handlers) > 0 {
		panic(fmt.Sprintf("server: handlers for operations not in v1.Routes: %v", slices.Collect(maps.Keys(handlers))))
	}
	// One pattern per refused method (not one method-less pattern per path): a method-less
	// "/…/process/start" would clash with "GET /…/process/{pid}" in the mux.
	for p, methods := range allowed {
		h := s.auth(methodNotAllowed(methods))
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
			if slices.Contains(methods, m) || (m == http.MethodHead && slices.Contains(methods, http.MethodGet)) {
				continue
			}
			s.handle(m+" "+p, h)
		}
	}
	s.handle("/", s.auth(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, errdefs.Newf(errdefs.CodeNotFound, "no route for %s %s", r.Method, r.URL.Path), "")
	}))
}

// handlers maps the OperationID of each of hutchd's own routes (v1.Routes not Forwarded) to its
// handler, authentication included.
func (s *Server) handlers() map[string]http.Handler {
	return map[string]http.Handler{
		"health":             http.HandlerFunc(s.health),
		"getOrCreateSandbox": s.auth(s.createSandbox),
		"listSandboxes":      s.auth(s.listSandboxes),
		"getSandbox":         s.auth(s.getSandbox),
		"destroySandbox":     s.auth(s.destroySandbox),
		"startSandbox":       s.auth(s.startSandbox),
		"stopSandbox":        s.auth(s.stopSandbox),
		"exposePort":         s.auth(s.exposePort),
		"listPorts":          s.auth(s.listPorts),
		"unexposePort":       s.auth(s.unexposePort),
		// Sleep and wake (lifecycle_sleep.go).
		"updateSandbox": s.auth(s.updateSandbox),
		"sleepSandbox":  s.auth(s.sleepSandbox),
		"wakeSandbox":   s.auth(s.wakeSandbox),
		// Backups (backups.go).
		"createBackup":  s.auth(s.createBackup),
		"restoreBackup": s.auth(s.restoreBackup),
		"listBackups":   s.auth(s.listBackups),
		"getBackup":     s.auth(s.getBackup),
		"deleteBackup":  s.auth(s.deleteBackup),
		// Snapshots and forks (snapshots.go).
		"createSnapshot":  s.auth(s.createSnapshot),
		"forkSandbox":     s.auth(s.forkSandbox),
		"restoreSnapshot": s.auth(s.restoreSnapshot),
		"listSnapshots":   s.auth(s.listSnapshots),
		"getSnapshot":     s.auth(s.getSnapshot),
		"deleteSnapshot":  s.auth(s.deleteSnapshot),
		// Terminals (terminals.go).
		"listTerminals": s.auth(s.listTerminals),
		"terminal":      s.auth(s.connectTerminal),
		"killTerminal":  s.auth(s.killTerminal),
		// Egress policy, events and CA (handle_egress.go, handle_egress_ca.go).
		"getEgressPolicy":   s.auth(s.getEgress),
		"putEgressPolicy":   s.auth(s.putEgress),
		"patchEgressPolicy": s.auth(s.patchEgress),
		"egressEvents":      s.auth(s.egressEvents),
		"getEgressCA":       s.auth(s.egressCAPEM),
		// Secrets (handle_secrets.go) and images (images.go).
		"putSecret":    s.auth(s.putSecret),
		"listSecrets":  s.auth(s.listSecrets),
		"deleteSecret": s.auth(s.deleteSecret),
		"listImages":   s.auth(s.listImages),
		"buildImage":   s.auth(s.buildImage),
	}
}

// console serves the web console handler h (internal/console) at /console/ and /console,
// without authentication (drawing from the unauthenticated rate limit): the static files hold
// no secrets, and every API call the console makes carries the token its user typed.
func (s *Server) console(h http.Handler) {
	s.handle("/console/", s.public(h))
	s.handle("/console", s.public(h))
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !cleanPath(r.URL.EscapedPath()) {
		if !s.allowUnauthenticated(w, r) {
			return
		}
		// The mux would answer with a redirect to the cleaned path, and a client that follows
		// it re-sends its method there: DELETE …/process/.. would become DELETE of the sandbox.
		writeError(w, r, errdefs.Newf(errdefs.CodeNotFound, "no route for %s %s: the path has empty, '.' or '..' segments", r.Method, r.URL.EscapedPath()), "")
		return
	}
	// Rate limits apply per route: auth and public take from the right bucket.
	if !s.log.Enabled(r.Context(), slog.LevelDebug) && s.audit == nil {
		s.mux.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	var note *auditNote
	if s.audit != nil {
		r, note = withAuditNote(r)
	}
	s.mux.ServeHTTP(rec, r)
	s.recordAudit(r, note, rec.status, time.Since(start))
	s.log.DebugContext(r.Context(), "request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "duration", time.Since(start))
}

// cleanPath reports whether p (escaped) has no empty segments (but a trailing slash) and no
// segment that is, or decodes to, "." or "..".
func cleanPath(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	segs := strings.Split(p[1:], "/")
	for i, seg := range segs {
		if seg == "" && i < len(segs)-1 {
			return false
		}
		dec, err := url.PathUnescape(seg)
		if err != nil || dec == "." || dec == ".." || strings.Contains(dec, "/") && (strings.Contains(dec, "/./") || strings.Contains(dec, "/../")) {
			return false
		}
	}
	return true
}

// auth checks the bearer token in constant time, against the token's SHA-256. The header is
// "Authorization: Bearer <token>", the scheme in any case (RFC 7235). A WebSocket handshake of
// the terminal route may carry it as the subprotocol "bearer.<token>" instead (browsers cannot
// set headers there; no other route accepts it), and every WebSocket handshake must come from
// no Origin or the request's own host (403 ORIGIN_NOT_ALLOWED otherwise; see terminals.go).
// A request with the token draws from its client's authenticated rate limit bucket; a refused
// one from the unauthenticated bucket, and is answered 429 RATE_LIMITED when that is empty,
// 401 UNAUTHENTICATED (or 403) otherwise.
func (s *Server) auth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upgrade := isWebSocketUpgrade(r)
		if upgrade && !sameOrigin(r) {
			if !s.allowUnauthenticated(w, r) {
				return
			}
			closeUnread(w)
			writeError(w, r, errdefs.Newf(errdefs.CodeOriginNotAllowed, "WebSocket from origin %q refused: only the API's own origin may connect", r.Header.Get("Origin")), "")
			return
		}
		got, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok && upgrade && strings.HasSuffix(r.Pattern, "/terminals/{tid}") {
			got, ok = wsToken(r) // only where a browser needs it: the terminal WebSocket
		}
		// The presented token is hashed and the hashes compared in constant time: the
		// comparison's time says nothing about the token, whatever its length.
		if sum := sha256.Sum256([]byte(got)); !ok || got == "" || subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) != 1 {
			if !s.allowUnauthenticated(w, r) {
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="hutchd"`)
			closeUnread(w)
			writeError(w, r, errdefs.New(errdefs.CodeUnauthenticated, "missing or wrong API token: send Authorization: Bearer <token> (hutchd logs where its token file is)"), "")
			return
		}
		// The client holds the token: its connection no longer counts against its address's
		// cap of not-yet-authenticated connections, and is never closed to make room for one
		// (internal/connlimit).
		connlimit.Trust(r.Context())
		if !s.allow(w, r, s.limiter, "") {
			return
		}
		// Every body is bounded (bodyLimit): one announced larger is refused before the
		// handler runs, and one that grows past the bound while read (chunked) fails there.
		limit := s.bodyLimit(r)
		if r.ContentLength > limit {
			closeUnread(w)
			writeError(w, r, tooLarge(limit), "")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		h(w, r)
	})
}

// bearerToken is the credentials of an Authorization header value "<scheme> <token>" whose
// scheme is "Bearer" in any case (RFC 7235 §2.1), spaces after the scheme skipped; ok is
// false for another scheme or no credentials.
func bearerToken(header string) (token string, ok bool) {
	scheme, rest, found := strings.Cut(header, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(rest, " "), true
}

// closeUnread makes a refusal close its connection without reading the body the client
// announced: net/http would otherwise wait for up to 256 KiB of it, forever if it never comes,
// and an unauthenticated client could hold connections that way.
func closeUnread(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	_ = rc.SetReadDeadline(time.Now())
	w.Header().Set("Connection", "close")
}

func methodNotAllowed(methods []string) http.HandlerFunc {
	allow := strings.Join(methods, ", ")
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, r, errdefs.Newf(errdefs.CodeMethodNotAllowed, "%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow), "")
	}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, v1.Health{Status: "ok", Version: s.version})
}

// writeError sends err as the JSON envelope with the status its code maps to.
func writeError(w http.ResponseWriter, r *http.Request, err error, operation string) {
	env := errdefs.ToEnvelope(err, operation)
	writeJSON(w, env.HTTPStatus, env)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// readJSON reads a JSON body of at most MaxJSONBody bytes into v. Errors: REQUEST_TOO_LARGE,
// INVALID_JSON.
func readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	if len(body) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return errdefs.Wrap(errdefs.CodeInvalidJSON, err, "request body is not valid JSON")
	}
	return nil
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxJSONBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(mbe.Limit)
		}
		return nil, errdefs.Wrap(errdefs.CodeInvalidArgument, err, "read request body")
	}
	return body, nil
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush passes flushes through, so SSE streams are not buffered.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
