package inject

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
)

// Pair is one secret form to redact and what replaces it.
type Pair struct {
	Find    []byte
	Replace []byte
	// Whole limits redaction to complete occurrences of Find. Use it for a form whose
	// beginning is public, such as a Basic credential "user:password" (the password's own
	// forms are redacted partially anyway). Otherwise every run of at least MinRun(len(Find))
	// consecutive bytes of Find is redacted too (a truncated or partial reflection).
	Whole bool
}

// MinPartialRun is the floor of MinRun: a partial reflection shorter than this many bytes is
// never redacted (unless the form itself is shorter).
const MinPartialRun = 8

// MinRun returns the shortest run of consecutive bytes of an n-byte form that is redacted:
// min(n, max(MinPartialRun, ⌈n/3⌉)). A reflection therefore reveals fewer than a third of a
// form's characters (and fewer than 8 of a short one) per run; see Redactor.
func MinRun(n int) int {
	return min(n, max(MinPartialRun, (n+2)/3))
}

// minShiftedForm is the shortest base64 form at a shifted alignment that is redacted: shorter
// ones (from secrets under 9 bytes) would match unrelated text.
const minShiftedForm = 8

// Forms returns the forms of value a response might reflect, each mapped to replace: raw;
// standard and URL base64, padded and not; base64 of value inside longer data at each of the
// three alignments (value preceded by 0, 1 or 2 other bytes, e.g. base64("Bearer "+value)),
// with the characters that also depend on the neighbouring bytes trimmed at each end;
// URL-encoded (query and path escaping); upper- and lower-cased (an upstream that
// normalises case); and hex, lower- and upper-case. Duplicates are dropped. Other encodings
// (UTF-16, mixed case, encryption: anything a hostile upstream chooses) are out of reach.
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
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for shift := range 3 {
			if s := shiftedBase64(enc, value, shift); len(s) >= minShiftedForm {
				add(s)
			}
		}
	}
	add(url.QueryEscape(string(value)))
	add(url.PathEscape(string(value)))
	add(strings.ToUpper(string(value)))
	add(strings.ToLower(string(value)))
	add(hex.EncodeToString(value))
	add(strings.ToUpper(hex.EncodeToString(value)))
	return out
}

// WholeForms is Forms with every pair marked Whole.
func WholeForms(value, replace []byte) []Pair {
	ps := Forms(value, replace)
	for i := range ps {
		ps[i].Whole = true
	}
	return ps
}

// shiftedBase64 returns the characters of enc's encoding of value that are the same whatever
// shift bytes precede value and whatever follows it: value encoded after shift filler bytes,
// minus the leading characters that carry filler bits (0, 2 or 3 for shift 0, 1, 2) and the
// last character when it also carries bits of the following byte.
func shiftedBase64(enc *base64.Encoding, value []byte, shift int) string {
	buf := make([]byte, shift+len(value))
	copy(buf[shift:], value)
	e := enc.EncodeToString(buf)
	lead := [3]int{0, 2, 3}[shift]
	trail := 0
	if len(buf)%3 != 0 {
		trail = 1
	}
	if len(e)-lead-trail <= 0 {
		return ""
	}
	return e[lead : len(e)-trail]
}
