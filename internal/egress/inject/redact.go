package inject

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/url"
	"sort"
)

// Pair is one secret form to redact and what replaces it.
type Pair struct {
	Find    []byte
	Replace []byte
}

// Forms returns the forms of value a response might reflect: raw, standard and URL base64,
// and URL-encoded (query and path escaping), each mapped to replace. Duplicates are dropped.
func Forms(value, replace []byte) []Pair {
	seen := map[string]bool{}
	var out []Pair
	add := func(s string) {
		if s == "" || seen[s] {
			return
		}
		seen[s] = true
		out = append(out, Pair{Find: []byte(s), Replace: replace})
	}
	add(string(value))
	add(base64.StdEncoding.EncodeToString(value))
	add(base64.RawStdEncoding.EncodeToString(value))
	add(base64.URLEncoding.EncodeToString(value))
	add(base64.RawURLEncoding.EncodeToString(value))
	add(url.QueryEscape(string(value)))
	add(url.PathEscape(string(value)))
	return out
}

// Redactor replaces secret forms in text. It is immutable and safe for concurrent use.
type Redactor struct {
	pairs []Pair // longest Find first
}

// NewRedactor returns a Redactor for pairs (empty Find values are ignored). Nil when there is
// nothing to redact.
func NewRedactor(pairs []Pair) *Redactor {
	var ps []Pair
	for _, p := range pairs {
		if len(p.Find) > 0 {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	sort.SliceStable(ps, func(i, j int) bool { return len(ps[i].Find) > len(ps[j].Find) })
	return &Redactor{pairs: ps}
}

// next returns the earliest match in b (longest at equal positions): its index and pair, or -1.
func (r *Redactor) next(b []byte) (int, *Pair) {
	best, bp := -1, (*Pair)(nil)
	for i := range r.pairs {
		p := &r.pairs[i]
		j := bytes.Index(b, p.Find)
		if j >= 0 && (best < 0 || j < best) {
			best, bp = j, p
		}
	}
	return best, bp
}

// String redacts s completely.
func (r *Redactor) String(s string) (string, int) {
	if r == nil {
		return s, 0
	}
	out, n := r.redact(nil, []byte(s))
	return string(out), n
}

func (r *Redactor) redact(dst, b []byte) ([]byte, int) {
	n := 0
	for {
		i, p := r.next(b)
		if i < 0 {
			return append(dst, b...), n
		}
		dst = append(dst, b[:i]...)
		dst = append(dst, p.Replace...)
		b = b[i+len(p.Find):]
		n++
	}
}

// holdBack returns how many trailing bytes of b are a proper prefix of some Find (a match
// that may complete with the next write): only those are held back, so a stream that carries
// no partial secret is never delayed (an ack-gated SSE stream keeps flowing).
func (r *Redactor) holdBack(b []byte) int {
	max := 0
	for _, p := range r.pairs {
		for k := min(len(p.Find)-1, len(b)); k > max; k-- {
			if bytes.Equal(b[len(b)-k:], p.Find[:k]) {
				max = k
				break
			}
		}
	}
	return max
}

// longerMayFollow reports whether b is a proper prefix of a Find longer than n.
func (r *Redactor) longerMayFollow(b []byte, n int) bool {
	for _, p := range r.pairs {
		if len(p.Find) > n && len(b) < len(p.Find) && bytes.HasPrefix(p.Find, b) {
			return true
		}
	}
	return false
}

// Reader wraps rc so what is read from it is redacted, across reads: a form split between two
// upstream reads is still found. Count reports the replacements made so far.
func (r *Redactor) Reader(rc io.ReadCloser) *RedactReader {
	return &RedactReader{r: r, src: rc}
}

// RedactReader is a streaming redactor (see Redactor.Reader).
type RedactReader struct {
	r       *Redactor
	src     io.ReadCloser
	pending []byte // read, not yet scanned to the end (a possible partial match)
	out     []byte // redacted, not yet returned
	err     error
	count   int
	buf     []byte
}

// Read returns redacted bytes.
func (rr *RedactReader) Read(p []byte) (int, error) {
	for len(rr.out) == 0 {
		if rr.err != nil {
			if len(rr.pending) > 0 {
				var n int
				rr.out, n = rr.r.redact(rr.out[:0], rr.pending)
				rr.count += n
				rr.pending = nil
				continue
			}
			return 0, rr.err
		}
		if rr.buf == nil {
			rr.buf = make([]byte, 32<<10)
		}
		n, err := rr.src.Read(rr.buf)
		rr.pending = append(rr.pending, rr.buf[:n]...)
		rr.err = err
		if err != nil {
			continue
		}
		// Redact everything except a possible partial match at the end.
		var cnt int
		keep := -1
		for {
			i, pr := rr.r.next(rr.pending)
			if i < 0 {
				break
			}
			if rr.r.longerMayFollow(rr.pending[i:], len(pr.Find)) {
				// A longer form (base64 with padding, say) may match here with more data.
				keep = len(rr.pending) - i
				break
			}
			rr.out = append(rr.out, rr.pending[:i]...)
			rr.out = append(rr.out, pr.Replace...)
			rr.pending = rr.pending[i+len(pr.Find):]
			cnt++
		}
		rr.count += cnt
		if keep < 0 {
			keep = rr.r.holdBack(rr.pending)
		}
		rr.out = append(rr.out, rr.pending[:len(rr.pending)-keep]...)
		rr.pending = append([]byte(nil), rr.pending[len(rr.pending)-keep:]...)
	}
	n := copy(p, rr.out)
	rr.out = rr.out[n:]
	if len(rr.out) == 0 {
		rr.out = nil
	}
	return n, nil
}

// Close closes the source.
func (rr *RedactReader) Close() error { return rr.src.Close() }

// Count is the number of replacements made so far.
func (rr *RedactReader) Count() int { return rr.count }
