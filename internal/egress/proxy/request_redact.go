package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"slices"

	"github.com/hutchdev/hutch/internal/egress/inject"
	"github.com/hutchdev/hutch/internal/egress/policy"
)

// cachedRedactor is a sandbox's redactor and the fingerprint of the pairs it was built from.
type cachedRedactor struct {
	sum [sha256.Size]byte
	red *inject.Redactor
}

// sandboxRedactor returns the redactor for a response to sandboxID under pol: the forms of
// every value pol can send upstream for the sandbox, whichever request this is and whatever
// host it goes to (an upstream may store a credential one request carried and hand it back on
// another path, or to another host sharing its storage): each secret an inject rule's
// templates name (replaced by "[redacted:NAME]"), each Basic credential whole, and each
// placeholder's secret (replaced by its placeholder, as a swap would), plus extra, the pairs
// of what this request carried (they differ from the policy's only when a secret changed
// between the look-ups). Secret values are looked up on every call, so a rotated secret is
// redacted from the next request on; the redactor is rebuilt only when the pairs change
// (policy or secrets). A secret that cannot be looked up is left out (a request needing it
// fails anyway). Nil when there is nothing to redact.
func (p *Proxy) sandboxRedactor(ctx context.Context, sandboxID string, pol *policy.Compiled, set *inject.Set, extra []inject.Pair) *inject.Redactor {
	pairs := append(p.policyPairs(ctx, pol, set), extra...)
	if len(pairs) == 0 {
		return nil
	}
	// In a fixed order (rules' headers and placeholders come from maps), once each.
	slices.SortFunc(pairs, comparePairs)
	pairs = slices.CompactFunc(pairs, func(a, b inject.Pair) bool { return comparePairs(a, b) == 0 })
	sum := fingerprint(pairs)
	p.mu.Lock()
	cr, ok := p.redactors[sandboxID]
	p.mu.Unlock()
	if ok && cr.sum == sum {
		return cr.red
	}
	red := inject.NewRedactor(pairs)
	p.mu.Lock()
	if p.redactors == nil {
		p.redactors = map[string]cachedRedactor{}
	}
	p.redactors[sandboxID] = cachedRedactor{sum: sum, red: red}
	p.mu.Unlock()
	return red
}

// policyPairs returns the redaction pairs of every value pol can inject or swap (see
// sandboxRedactor).
func (p *Proxy) policyPairs(ctx context.Context, pol *policy.Compiled, set *inject.Set) []inject.Pair {
	if pol == nil || p.icpt == nil || p.icpt.cfg.Secret == nil {
		return nil
	}
	var pairs []inject.Pair
	used := map[string]bool{}
	secret := func(name string) (string, error) {
		v, err := p.icpt.cfg.Secret(ctx, name)
		if err != nil {
			return "", err
		}
		if !used[name] {
			used[name] = true
			pairs = append(pairs, inject.Forms(v, []byte("[redacted:"+name+"]"))...)
		}
		return string(v), nil
	}
	for _, rule := range pol.Spec().Rules {
		in := rule.Inject
		if rule.Action != policy.ActionInject || in == nil {
			continue
		}
		for _, tmpl := range in.SetHeaders {
			_, _ = policy.Expand(tmpl, secret) // for secret's side effect: it collects the values to redact
		}
		if ba := in.BasicAuth; ba != nil {
			u, uerr := policy.Expand(ba.Username, secret)
			pw, perr := policy.Expand(ba.Password, secret)
			if uerr == nil && perr == nil {
				pairs = append(pairs, inject.WholeForms([]byte(u+":"+pw), []byte("[redacted:basic-auth]"))...)
			}
		}
	}
	for _, b := range set.Bindings() {
		v, err := p.icpt.cfg.Secret(ctx, b.Secret)
		if err != nil {
			continue
		}
		pairs = append(pairs, inject.Forms(v, []byte(b.Prefix+b.Token))...)
	}
	return pairs
}

// fingerprint identifies a list of pairs.
func fingerprint(pairs []inject.Pair) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	for _, pr := range pairs {
		for _, b := range [][]byte{pr.Find, pr.Replace} {
			binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
			h.Write(n[:])
			h.Write(b)
		}
		h.Write([]byte{boolByte(pr.Whole)})
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

func comparePairs(a, b inject.Pair) int {
	if c := bytes.Compare(a.Find, b.Find); c != 0 {
		return c
	}
	if c := bytes.Compare(a.Replace, b.Replace); c != 0 {
		return c
	}
	return int(boolByte(a.Whole)) - int(boolByte(b.Whole))
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
