package inject

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/hutchdev/hutch/internal/egress/policy"
)

// MaxBodySwap is the largest request body scanned (and, in "body" scope, rewritten) for
// placeholders, in bytes. A bigger body that carries a placeholder is refused, never sent
// half-swapped.
const MaxBodySwap = 1 << 20

// Violation actions (policy.Placeholder.OnViolation).
const (
	OnViolationBlock        = "block"
	OnViolationBlockAndStop = "block_and_stop"
	OnViolationPass         = "pass"
)

// Binding is one placeholder of a sandbox: the secret it stands for and where it may go.
type Binding struct {
	Secret      string
	Token       string // Marker + 24 base62 characters
	Prefix      string // what the env value carries before Token
	hosts       []policy.Pattern
	in          map[string]bool // "header:authorization", "query", "path", "body"
	OnViolation string
}

// Set is a sandbox's placeholders, found by token.
type Set struct {
	byToken map[string]*Binding
}

// NewSet builds the Set of spec's placeholders; tokens maps secret names to the sandbox's
// stored placeholder tokens (secrets without one are skipped: their env var was never given).
func NewSet(phs []policy.Placeholder, tokens map[string]string) *Set {
	s := &Set{byToken: map[string]*Binding{}}
	for _, ph := range phs {
		tok := tokens[ph.Secret]
		if tok == "" {
			continue
		}
		b := &Binding{Secret: ph.Secret, Token: tok, Prefix: ph.Prefix, in: map[string]bool{}, OnViolation: ph.OnViolation}
		if b.OnViolation == "" {
			b.OnViolation = OnViolationBlock
		}
		for _, h := range ph.Hosts {
			if p, err := policy.ParsePattern(h); err == nil {
				b.hosts = append(b.hosts, p)
			}
		}
		in := ph.In
		if len(in) == 0 {
			in = []string{"header:authorization"}
		}
		for _, l := range in {
			b.in[strings.ToLower(l)] = true
		}
		s.byToken[tok] = b
	}
	return s
}

// Empty reports whether the set holds no placeholder.
func (s *Set) Empty() bool { return s == nil || len(s.byToken) == 0 }

// Bindings returns the set's bindings (no particular order).
func (s *Set) Bindings() []*Binding {
	if s == nil {
		return nil
	}
	out := make([]*Binding, 0, len(s.byToken))
	for _, b := range s.byToken {
		out = append(out, b)
	}
	return out
}

func (b *Binding) hostOK(host string) bool {
	for _, p := range b.hosts {
		if p.Match(host) {
			return true
		}
	}
	return false
}

// Violation is a placeholder found where its secret may not go (never the value).
type Violation struct {
	Secret   string `json:"secret"`
	Location string `json:"location"`
	Action   string `json:"action"`
}

// ErrViolation is returned by Apply when a placeholder must be blocked.
var ErrViolation = errors.New("placeholder sent where its secret may not go")

// Result is what Apply did to a request.
type Result struct {
	Swapped    []string    // secret names swapped in
	Violations []Violation // placeholders found out of scope (all of them, blocked or passed)
	Redact     []Pair      // real-value forms → placeholder, for the response
	Stop       bool        // a violation asks for the sandbox to be stopped
}

// Apply swaps the placeholders of r (sent towards host) for real values where their binding
// allows it (host and location in scope) and reports the others: towards a host the binding
// does not name, with the binding's OnViolation action; towards a bound host outside the
// swap scope (another header, the body...), with action pass (sent unchanged). value returns a secret's
// value. When a violation's action is block or block_and_stop the error wraps ErrViolation and
// r must not be sent. Locations: "header:<lower-case name>" (Basic credentials decoded),
// "query", "path", "body" (identity-encoded bodies up to MaxBodySwap; a bigger or encoded
// body holding a marker is a violation); a placeholder in a header or declared trailer name is
// never swapped and is reported at "header-name".
func (s *Set) Apply(ctx context.Context, host string, r *http.Request, value func(ctx context.Context, name string) ([]byte, error)) (Result, error) {
	var res Result
	if s.Empty() {
		return res, nil
	}
	swapped := map[string]bool{}
	var verr error
	// swap rewrites text for location loc; it returns the new text. Real values are written
	// raw, except in the raw query where they are query-escaped.
	swap := func(text, loc string) (string, error) {
		if !strings.Contains(text, Marker) {
			return text, nil
		}
		var out strings.Builder
		rest := text
		for {
			i := strings.Index(rest, Marker)
			if i < 0 || len(rest)-i < PlaceholderLen {
				out.WriteString(rest)
				return out.String(), nil
			}
			tok := rest[i : i+PlaceholderLen]
			b := s.byToken[tok]
			if b == nil {
				// Not one of this sandbox's placeholders: left as is.
				out.WriteString(rest[:i+len(Marker)])
				rest = rest[i+len(Marker):]
				continue
			}
			start := i
			if b.Prefix != "" && strings.HasSuffix(rest[:i], b.Prefix) {
				start = i - len(b.Prefix)
			}
			if hostOK := b.hostOK(host); !hostOK || !b.in[loc] {
				// Towards its own host but outside the swap scope the placeholder goes as is
				// (worthless, and the host is trusted with the real value anyway): reported
				// with action pass. Towards any other host the binding's action applies.
				action := b.OnViolation
				if hostOK {
					action = OnViolationPass
				}
				res.Violations = append(res.Violations, Violation{Secret: b.Secret, Location: loc, Action: action})
				if action != OnViolationPass {
					if action == OnViolationBlockAndStop {
						res.Stop = true
					}
					verr = fmt.Errorf("%w: secret %s in %s towards %s", ErrViolation, b.Secret, loc, host)
				}
				out.WriteString(rest[:i+PlaceholderLen])
				rest = rest[i+PlaceholderLen:]
				continue
			}
			v, err := value(ctx, b.Secret)
			if err != nil {
				return "", fmt.Errorf("placeholder of %s: %w", b.Secret, err)
			}
			out.WriteString(rest[:start])
			if loc == "query" {
				out.WriteString(url.QueryEscape(string(v)))
			} else {
				out.Write(v)
			}
			rest = rest[i+PlaceholderLen:]
			if !swapped[b.Secret] {
				swapped[b.Secret] = true
				res.Swapped = append(res.Swapped, b.Secret)
				res.Redact = append(res.Redact, Forms(v, []byte(b.Prefix+b.Token))...)
			}
		}
	}
	// Field names are never a swap location, and arrive case-folded (HTTP/2 lower-cases them,
	// Go canonicalises them): a placeholder in one is found without regard to case and is a
	// violation like one in any other place out of scope. Declared request trailers count:
	// their names go upstream in a Trailer field.
	for _, h := range []http.Header{r.Header, r.Trailer} {
		for k := range h {
			s.nameViolations(k, host, &res, &verr)
		}
	}
	for k, vs := range r.Header {
		loc := "header:" + strings.ToLower(k)
		for i, v := range vs {
			nv, err := swap(v, loc)
			if err != nil {
				return res, err
			}
			// Basic credentials hide the placeholder in base64.
			if scheme, cred, ok := strings.Cut(nv, " "); ok && strings.EqualFold(scheme, "basic") {
				if dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred)); err == nil && bytes.Contains(dec, []byte(Marker)) {
					nd, err := swap(string(dec), loc)
					if err != nil {
						return res, err
					}
					nv = scheme + " " + base64.StdEncoding.EncodeToString([]byte(nd))
				}
			}
			r.Header[k][i] = nv
		}
	}
	// Path and query, raw and decoded (a URL-encoded placeholder is still found).
	if p := r.URL.EscapedPath(); strings.Contains(p, Marker) || strings.Contains(r.URL.Path, Marker) {
		np, err := swap(r.URL.Path, "path")
		if err != nil {
			return res, err
		}
		r.URL.Path, r.URL.RawPath = np, ""
	}
	if strings.Contains(r.URL.RawQuery, Marker) {
		nq, err := swap(r.URL.RawQuery, "query")
		if err != nil {
			return res, err
		}
		r.URL.RawQuery = nq
	} else if dq, err := url.QueryUnescape(r.URL.RawQuery); err == nil && strings.Contains(dq, Marker) {
		// An escaped placeholder: checked for scope, sent unchanged (it is worthless).
		if _, err := swap(dq, "query"); err != nil {
			return res, err
		}
	}
	if err := s.body(r, host, swap); err != nil {
		return res, err
	}
	return res, verr
}

// nameViolations reports the placeholders of s in the field name k (compared without regard
// to ASCII case) sent towards host: action pass towards a bound host (the placeholder is
// worthless and the host trusted), else the binding's; verr is set when one must be blocked.
func (s *Set) nameViolations(k, host string, res *Result, verr *error) {
	lk := asciiLower(k)
	if !strings.Contains(lk, Marker) {
		return
	}
	for _, b := range s.byToken {
		if !strings.Contains(lk, asciiLower(b.Token)) {
			continue
		}
		action := b.OnViolation
		if b.hostOK(host) {
			action = OnViolationPass
		}
		res.Violations = append(res.Violations, Violation{Secret: b.Secret, Location: "header-name", Action: action})
		if action != OnViolationPass {
			if action == OnViolationBlockAndStop {
				res.Stop = true
			}
			*verr = fmt.Errorf("%w: secret %s in a header name towards %s", ErrViolation, b.Secret, host)
		}
	}
}

// body scans (and in "body" scope swaps) r's body.
func (s *Set) body(r *http.Request, host string, swap func(string, string) (string, error)) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	identity := r.Header.Get("Content-Encoding") == "" || strings.EqualFold(r.Header.Get("Content-Encoding"), "identity")
	if r.ContentLength < 0 || r.ContentLength > MaxBodySwap || !identity {
		// Not buffered: when a placeholder in it would have to be swapped or blocked, stream
		// it through a scanner that fails the upload on a marker.
		if s.guardStreamed(host) {
			r.Body = &markerGuard{src: r.Body}
		}
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxBodySwap+1))
	r.Body.Close()
	if err != nil {
		return fmt.Errorf("read request body: %w", err)
	}
	nb := string(b)
	if bytes.Contains(b, []byte(Marker)) {
		if nb, err = swap(nb, "body"); err != nil {
			return err
		}
	}
	r.Body = io.NopCloser(strings.NewReader(nb))
	r.ContentLength = int64(len(nb))
	r.Header.Set("Content-Length", strconv.Itoa(len(nb)))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(nb)), nil }
	return nil
}

// guardStreamed reports whether a streamed body towards host must be scanned: some binding
// would swap in the body (impossible without buffering) or block towards host.
func (s *Set) guardStreamed(host string) bool {
	for _, b := range s.byToken {
		if b.hostOK(host) {
			if b.in["body"] {
				return true
			}
		} else if b.OnViolation != OnViolationPass {
			return true
		}
	}
	return false
}

// markerGuard passes a streamed body through and fails with ErrViolation at the first
// placeholder marker (also one split across reads).
type markerGuard struct {
	src  io.ReadCloser
	tail []byte
}

func (m *markerGuard) Read(p []byte) (int, error) {
	n, err := m.src.Read(p)
	if n > 0 {
		buf := append(m.tail, p[:n]...)
		if bytes.Contains(buf, []byte(Marker)) {
			return 0, fmt.Errorf("%w: in a streamed request body", ErrViolation)
		}
		k := min(len(Marker)-1, len(buf))
		m.tail = append(m.tail[:0], buf[len(buf)-k:]...)
	}
	return n, err
}

func (m *markerGuard) Close() error { return m.src.Close() }
