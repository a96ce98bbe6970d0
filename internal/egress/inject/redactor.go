package inject

import (
	"bytes"
	"encoding/binary"
	"sort"
)

// Redactor replaces secret forms in text: every complete form, and every run of at least
// MinRun(len(form)) consecutive bytes of a form that is not Whole (a partial reflection: the
// first 25 of 26 characters, a truncated token in an error message). A run is replaced as a
// whole by its pair's Replace; where runs of several pairs overlap, their union is replaced
// once, by the Replace of the longest.
//
// The scan looks up q-grams (q = min(8, shortest minimum run) bytes) in a set built from the
// forms, behind a 64 Kibit filter, and only at every k-th position, k = shortest minimum run
// − q + 1: every run long enough to redact holds a q-gram starting at such a position. A hit
// is extended byte by byte in both directions against the form. A Redactor is immutable and
// safe for concurrent use.
type Redactor struct {
	pairs  []Pair // longest Find first
	minRun []int  // per pair: MinRun(len(Find)), or len(Find) when Whole
	q      int
	mask   uint64 // keeps the low q bytes of a little-endian load
	step   int
	maxLen int
	filter [1 << 10]uint64
	grams  map[uint64][]gramRef
	// fold is the same Redactor over ASCII lower-cased forms, for text that travels
	// case-folded (header names: see Header).
	fold *Redactor
}

// gramRef is one place a q-gram occurs: pair index and offset in its Find.
type gramRef struct {
	pair, off int32
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
	r := build(ps)
	lower := make([]Pair, len(ps))
	for i, p := range ps {
		lower[i] = Pair{Find: []byte(asciiLower(string(p.Find))), Replace: p.Replace, Whole: p.Whole}
	}
	r.fold = build(lower)
	return r
}

// build returns the Redactor of ps (no empty Find), without fold.
func build(ps []Pair) *Redactor {
	sort.SliceStable(ps, func(i, j int) bool { return len(ps[i].Find) > len(ps[j].Find) })
	r := &Redactor{pairs: ps, minRun: make([]int, len(ps)), grams: map[uint64][]gramRef{}}
	shortest := 1 << 30
	for i, p := range ps {
		r.minRun[i] = MinRun(len(p.Find))
		if p.Whole {
			r.minRun[i] = len(p.Find)
		}
		shortest = min(shortest, r.minRun[i])
		r.maxLen = max(r.maxLen, len(p.Find))
	}
	r.q = min(8, shortest)
	r.mask = ^uint64(0) >> (64 - 8*r.q)
	r.step = shortest - r.q + 1
	for i, p := range ps {
		for off := 0; off+r.q <= len(p.Find); off++ {
			k := r.key(p.Find, off)
			s := slot(k)
			r.filter[s>>6] |= 1 << (s & 63)
			r.grams[k] = append(r.grams[k], gramRef{pair: int32(i), off: int32(off)})
		}
	}
	return r
}

// key is the q bytes of b at i, packed little-endian.
func (r *Redactor) key(b []byte, i int) uint64 {
	if i+8 <= len(b) {
		return binary.LittleEndian.Uint64(b[i:]) & r.mask
	}
	var v uint64
	for j := range r.q {
		v |= uint64(b[i+j]) << (8 * j)
	}
	return v
}

func slot(k uint64) uint64 { return (k * 0x9E3779B97F4A7C15) >> 48 }

// String redacts s completely.
func (r *Redactor) String(s string) (string, int) {
	if r == nil {
		return s, 0
	}
	out, _, n := r.scan(nil, []byte(s), true)
	return string(out), n
}

// scan appends b, redacted, to dst. Unless eof, it stops before a run that more data may
// extend or complete (a form split between writes), and before a trailing partial run that
// more data may grow into a redacted one: it returns how many bytes of b it consumed; the
// rest must be passed again with the next data. With eof it consumes everything.
func (r *Redactor) scan(dst, b []byte, eof bool) ([]byte, int, int) {
	count, floor := 0, 0 // b[:floor] is in dst
	for i := 0; i+r.q <= len(b); i += r.step {
		k := r.key(b, i)
		s := slot(k)
		if r.filter[s>>6]&(1<<(s&63)) == 0 {
			continue
		}
		refs := r.grams[k]
		if len(refs) == 0 {
			continue
		}
		start, end, best, hold := r.runsAt(b, i, floor, refs, eof)
		if hold >= 0 {
			return append(dst, b[floor:hold]...), hold, count
		}
		if best < 0 {
			continue
		}
		dst = append(dst, b[floor:start]...)
		dst = append(dst, r.pairs[best].Replace...)
		count++
		floor = end
		i = end - r.step
	}
	if eof {
		return append(dst, b[floor:]...), len(b), count
	}
	h := r.tail(b[floor:])
	return append(dst, b[floor:len(b)-h]...), len(b) - h, count
}

// runsAt extends every occurrence refs lists of the q-gram at b[i:] into a maximal run (not
// before floor) and returns the union [start, end) of the runs long enough to redact with the
// pair of the longest (best; -1 when none), or hold >= 0 when, short of eof, a run reaching
// the end of b may still grow into one to redact: the caller keeps b[hold:].
func (r *Redactor) runsAt(b []byte, i, floor int, refs []gramRef, eof bool) (start, end, best, hold int) {
	start, end, best, hold = -1, -1, -1, -1
	bestLen := 0
	for _, rf := range refs {
		f := r.pairs[rf.pair].Find
		a, z := i, i+r.q
		fa, fz := int(rf.off), int(rf.off)+r.q
		for a > floor && fa > 0 && b[a-1] == f[fa-1] {
			a--
			fa--
		}
		for z < len(b) && fz < len(f) && b[z] == f[fz] {
			z++
			fz++
		}
		need := r.minRun[rf.pair]
		if !eof && z == len(b) && fz < len(f) && (z-a)+(len(f)-fz) >= need {
			if hold < 0 || a < hold {
				hold = a
			}
			continue
		}
		if z-a < need {
			continue
		}
		if start < 0 || a < start {
			start = a
		}
		end = max(end, z)
		if z-a > bestLen {
			best, bestLen = int(rf.pair), z-a
		}
	}
	if hold >= 0 && start >= 0 {
		hold = min(hold, start)
	}
	return start, end, best, hold
}

// tail returns how many trailing bytes of b must wait for more data: the longest suffix that
// is a substring of some form at an offset from which it can still grow into a run to redact
// (for a Whole pair: a prefix of the form). A stream whose writes end in bytes no form holds
// is never delayed (an ack-gated SSE stream keeps flowing).
func (r *Redactor) tail(b []byte) int {
	h := 0
	for j := 1; j <= len(b) && j < r.maxLen; j++ {
		suf := b[len(b)-j:]
		found := false
		for pi, p := range r.pairs {
			f := p.Find
			if j >= len(f) || !bytes.Contains(f, suf) {
				continue
			}
			found = true
			// An occurrence at offset o can still reach minRun when o <= len(f)-minRun.
			if lim := len(f) - r.minRun[pi] + j; lim >= j && bytes.Contains(f[:min(lim, len(f))], suf) {
				h = j
			}
		}
		if !found {
			break
		}
	}
	return h
}
