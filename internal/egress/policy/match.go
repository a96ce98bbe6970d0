package policy

import (
	"fmt"
	"net/netip"
	"path"
	"strings"
)

// Pattern is a compiled host pattern (Spec.Allow, Spec.Deny, Rule.Hosts, Placeholder.Hosts):
// an exact canonical name, "*.suffix" (matches names with one or more whole labels in front of
// ".suffix", never "suffix" itself) or "*" (every name). Matching is label-aware:
// "*.example.com" never matches "evilexample.com".
type Pattern struct {
	// raw is the pattern as compiled (canonical).
	raw string
	// suffix is ".suffix" for a wildcard, "" for "*" and for exact names.
	suffix string
	// any is true for "*".
	any bool
}

// ParsePattern compiles p. It fails (errdefs-free, plain error; Validate wraps it) when p is
// empty, an IP literal, "*" inside or after a label ("*example.com", "foo*.bar", "a.*.b"), or
// not a valid host name after "*.".
func ParsePattern(p string) (Pattern, error) {
	if p == "*" {
		return Pattern{raw: "*", any: true}, nil
	}
	if strings.HasPrefix(p, "[") {
		return Pattern{}, fmt.Errorf("%q is an IP address: host patterns are names", p)
	}
	if _, err := netip.ParseAddr(p); err == nil {
		return Pattern{}, fmt.Errorf("%q is an IP address: host patterns are names", p)
	}
	rest, wild := strings.CutPrefix(p, "*.")
	if strings.Contains(rest, "*") {
		return Pattern{}, fmt.Errorf("%q: \"*\" may only be the whole leftmost label (\"*.example.com\") or the whole pattern", p)
	}
	if strings.Contains(rest, ":") {
		return Pattern{}, fmt.Errorf("%q: host patterns carry no port", p)
	}
	h, err := CanonicalHost(rest)
	if err != nil {
		return Pattern{}, fmt.Errorf("%q is not a valid host name", p)
	}
	if h != rest {
		return Pattern{}, fmt.Errorf("%q is not canonical: use %q (lower case, no trailing dot)", p, strings.Replace(p, rest, h, 1))
	}
	if wild {
		return Pattern{raw: p, suffix: "." + h}, nil
	}
	return Pattern{raw: p}, nil
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.raw }

// Match reports whether the canonical host name h matches p.
func (p Pattern) Match(h string) bool {
	switch {
	case p.any:
		return true
	case p.suffix != "":
		return len(h) > len(p.suffix) && strings.HasSuffix(h, p.suffix)
	}
	return h == p.raw
}

// Specificity orders patterns: exact names beat wildcards, longer suffixes beat shorter ones,
// "*" is least specific. Higher is more specific.
func (p Pattern) Specificity() int {
	switch {
	case p.any:
		return 0
	case p.suffix != "":
		return 1 + strings.Count(p.suffix, ".")*1000 + len(p.suffix)
	}
	return 1 << 30
}

// Covers reports whether every name q matches is also matched by p.
func (p Pattern) Covers(q Pattern) bool {
	switch {
	case p.any:
		return true
	case q.any:
		return false
	case p.suffix == "":
		return q.suffix == "" && q.raw == p.raw
	case q.suffix == "":
		return p.Match(q.raw)
	}
	return q.suffix == p.suffix || strings.HasSuffix(q.suffix, p.suffix)
}

// patterns is a compiled pattern list.
type patterns []Pattern

func (ps patterns) match(h string) bool {
	for _, p := range ps {
		if p.Match(h) {
			return true
		}
	}
	return false
}

// best returns the highest specificity of a pattern in ps that matches h, or -1.
func (ps patterns) best(h string) int {
	b := -1
	for _, p := range ps {
		if p.Match(h) {
			b = max(b, p.Specificity())
		}
	}
	return b
}

// CanonicalPath returns the request path rules are matched against: it always starts with "/",
// has "." and ".." segments resolved and duplicate slashes removed (path.Clean), and keeps a
// trailing slash. Pass the decoded path (url.URL.Path), so "%2e%2e" and "%2F" cannot dodge a
// rule.
func CanonicalPath(p string) string {
	if p == "" {
		return "/"
	}
	trailing := strings.HasSuffix(p, "/")
	c := path.Clean("/" + p)
	if trailing && c != "/" {
		c += "/"
	}
	return c
}

// matches reports whether m selects the request (method upper-case, p canonical).
func (m *Match) matches(method, p string) bool {
	if m == nil {
		return true
	}
	if len(m.Methods) > 0 {
		ok := false
		for _, x := range m.Methods {
			if x == method {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if m.Path != nil {
		switch {
		case m.Path.Exact != "":
			return p == m.Path.Exact
		case m.Path.Prefix != "":
			return strings.HasPrefix(p, m.Path.Prefix)
		}
	}
	return true
}
