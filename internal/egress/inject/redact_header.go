package inject

import "net/http"

// Header redacts one header block that goes back to the sandbox (an informational 1xx block,
// the final header, trailers) in place and returns how many fields it changed or dropped:
// every value is redacted like body text; a field whose name holds a form, or a run of one
// long enough to redact, is dropped whole, values included. Names are compared without
// regard to ASCII case, because HTTP folds them on the way (HTTP/2 sends them lower-case, Go
// canonicalises "x-abcDEF" to "X-Abcdef"): a case-sensitive match would let a folded secret
// through. They are dropped rather than rewritten because a redaction marker is not a valid
// field name (servers drop such fields silently) and a renamed field would still carry the
// value. A nil Redactor changes nothing.
func (r *Redactor) Header(h http.Header) int {
	if r == nil {
		return 0
	}
	n := 0
	for k, vs := range h {
		if r.HoldsFolded(k) {
			delete(h, k)
			n++
			continue
		}
		for i, v := range vs {
			if nv, c := r.String(v); c > 0 {
				vs[i] = nv
				n++
			}
		}
	}
	return n
}

// HoldsFolded reports whether s, compared without regard to ASCII case, holds a form or a run
// of one long enough to redact.
func (r *Redactor) HoldsFolded(s string) bool {
	if r == nil {
		return false
	}
	_, _, n := r.fold.scan(nil, []byte(asciiLower(s)), true)
	return n > 0
}
