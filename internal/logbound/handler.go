// Package logbound bounds what code inside a sandbox can make hutchd write to its logs: a
// slog.Handler wrapper that cuts every long value and rate-limits the lines of each sandbox,
// and a size-rotated file. Sandbox code chooses much of what hutchd logs on its behalf (egress
// request targets, host and DNS names, error texts quoting them) and how often: each of those
// must cost the host a bounded number of bytes.
package logbound

import (
	"context"
	"encoding"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Defaults of Options.
const (
	DefaultMaxValue = 1 << 10
	DefaultRate     = 5
	DefaultBurst    = 50
	DefaultSummary  = time.Minute
	// DefaultKey is the attribute naming the sandbox a line is about, as hutchd's packages log
	// it (the lint's sloglint rule keeps to it).
	DefaultKey = "sandbox_id"
	// maxTracked bounds the sandboxes whose buckets are kept between summaries; past it the
	// idle ones are forgotten first.
	maxTracked = 4096
)

// SummaryMessage is the message of the line that reports a sandbox's suppressed lines.
const SummaryMessage = "log lines suppressed"

// Options configure a Handler; zero fields take the defaults.
type Options struct {
	// MaxValue is the most bytes kept of the message and of each string, []byte, error,
	// Stringer or other value (formatted as the handler would); a longer one is cut at a UTF-8
	// boundary and ends with "…[N bytes cut]".
	MaxValue int
	// Rate is how many lines per second one sandbox may log on average at each level, in
	// bursts of Burst; a negative Rate turns the limit off. Levels have buckets of their own
	// so that a flood of debug lines (one per egress request) leaves room for the sandbox's
	// lifecycle lines at info, and a flood at info for its warnings.
	Rate  float64
	Burst int
	// Summary is how often the suppressed lines of each sandbox are reported, one line per
	// sandbox ("log lines suppressed", with the count), by Run or the next line logged.
	Summary time.Duration
	// Keys are the attributes naming the sandbox (top level, from the record or from With),
	// the first one found counting; the summary line uses the first key. Default DefaultKey
	// and "id", so that a line naming its sandbox "id" is bounded all the same.
	Keys []string
	// Now is the clock (tests).
	Now func() time.Time
}

// Handler wraps another handler. Handlers derived with WithAttrs and WithGroup share the
// rate limit state of the one they come from.
type Handler struct {
	next    slog.Handler
	st      *state
	sandbox string // the value of one of Keys given to WithAttrs, if any
	grouped bool   // WithGroup was called: later attributes are not top level
}

// state is what all handlers derived from one New share.
type state struct {
	opt  Options
	root slog.Handler // the wrapped handler as given to New, for summary lines

	mu          sync.Mutex
	buckets     map[bucketKey]*bucket // guarded by mu
	lastSummary time.Time             // guarded by mu
}

type bucketKey struct {
	sandbox string
	level   slog.Level
}

type bucket struct {
	tokens     float64
	last       time.Time
	suppressed int
}

// New returns a Handler that bounds the records it passes to next.
func New(next slog.Handler, opt Options) *Handler {
	if opt.MaxValue <= 0 {
		opt.MaxValue = DefaultMaxValue
	}
	if opt.Rate == 0 {
		opt.Rate = DefaultRate
	}
	if opt.Burst <= 0 {
		opt.Burst = DefaultBurst
	}
	if opt.Summary <= 0 {
		opt.Summary = DefaultSummary
	}
	if len(opt.Keys) == 0 {
		opt.Keys = []string{DefaultKey, "id"}
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	st := &state{opt: opt, root: next, buckets: map[bucketKey]*bucket{}, lastSummary: opt.Now()}
	return &Handler{next: next, st: st}
}

// Enabled reports whether the wrapped handler handles level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle passes r on with its message and values bounded, unless r is about a sandbox that
// has used up its rate (then it is counted for the next summary and dropped).
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	sb := h.sandbox
	if sb == "" && !h.grouped {
		r.Attrs(func(a slog.Attr) bool {
			if slices.Contains(h.st.opt.Keys, a.Key) {
				sb = cut(a.Value.Resolve().String(), h.st.opt.MaxValue) // a bounded map key
				return false
			}
			return true
		})
	}
	now := h.st.opt.Now()
	h.st.summarize(ctx, now, false)
	if sb != "" && !h.st.allow(bucketKey{sb, r.Level}, now) {
		return nil
	}
	max := h.st.opt.MaxValue
	out := slog.NewRecord(r.Time, r.Level, cut(r.Message, max), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(bound(a, max))
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs returns a handler whose attrs are bounded once, here.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	c := *h
	b := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		b[i] = bound(a, h.st.opt.MaxValue)
		if !h.grouped && c.sandbox == "" && slices.Contains(h.st.opt.Keys, a.Key) {
			c.sandbox = b[i].Value.String()
		}
	}
	c.next = h.next.WithAttrs(b)
	return &c
}

// WithGroup returns a handler whose later attributes are in group name.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.next = h.next.WithGroup(cut(name, h.st.opt.MaxValue))
	c.grouped = true
	return &c
}

// Run writes the summary lines every Options.Summary until ctx ends (so suppressed lines are
// reported even when the sandbox falls silent), then once more.
func (h *Handler) Run(ctx context.Context) {
	t := time.NewTicker(h.st.opt.Summary)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			h.Flush(context.WithoutCancel(ctx))
			return
		case <-t.C:
			h.st.summarize(ctx, h.st.opt.Now(), false)
		}
	}
}

// Flush writes the summary lines of all sandboxes with suppressed lines now.
func (h *Handler) Flush(ctx context.Context) { h.st.summarize(ctx, h.st.opt.Now(), true) }

// allow takes a token from bucket k, or counts the line as suppressed.
func (s *state) allow(k bucketKey, now time.Time) bool {
	if s.opt.Rate < 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[k]
	if b == nil {
		if len(s.buckets) >= maxTracked {
			s.forgetIdle(now)
		}
		b = &bucket{tokens: float64(s.opt.Burst), last: now}
		s.buckets[k] = b
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(float64(s.opt.Burst), b.tokens+el*s.opt.Rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	b.suppressed++
	return false
}

// forgetIdle drops the buckets that are full again and have nothing to report; when every
// bucket is busy it drops them all (their counts are lost: the map must stay bounded).
func (s *state) forgetIdle(now time.Time) {
	for k, b := range s.buckets {
		if b.suppressed == 0 && b.tokens+now.Sub(b.last).Seconds()*s.opt.Rate >= float64(s.opt.Burst) {
			delete(s.buckets, k)
		}
	}
	if len(s.buckets) >= maxTracked {
		clear(s.buckets)
	}
}

// summarize writes one summary line per sandbox with suppressed lines, when Summary has
// passed since the last time (or force).
func (s *state) summarize(ctx context.Context, now time.Time, force bool) {
	if s.opt.Rate < 0 {
		return
	}
	type line struct {
		sb string
		n  int
	}
	var lines []line
	at := map[string]int{} // index in lines by sandbox: one line per sandbox, all levels
	s.mu.Lock()
	if !force && now.Sub(s.lastSummary) < s.opt.Summary {
		s.mu.Unlock()
		return
	}
	window := now.Sub(s.lastSummary)
	s.lastSummary = now
	for k, b := range s.buckets {
		if b.suppressed == 0 {
			continue
		}
		if i, ok := at[k.sandbox]; ok {
			lines[i].n += b.suppressed
		} else {
			at[k.sandbox] = len(lines)
			lines = append(lines, line{k.sandbox, b.suppressed})
		}
		b.suppressed = 0
	}
	slices.SortFunc(lines, func(a, b line) int { return strings.Compare(a.sb, b.sb) })
	s.mu.Unlock()
	if !s.root.Enabled(ctx, slog.LevelWarn) {
		return
	}
	for _, l := range lines {
		r := slog.NewRecord(now, slog.LevelWarn, SummaryMessage, 0)
		r.AddAttrs(slog.String(s.opt.Keys[0], l.sb), slog.Int("suppressed", l.n),
			slog.Duration("window", window.Round(time.Millisecond)))
		_ = s.root.Handle(ctx, r)
	}
}

// bound returns a with its value (resolved; groups member by member) cut to max bytes.
func bound(a slog.Attr, max int) slog.Attr {
	a.Key = cut(a.Key, max)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s := v.String(); len(s) > max {
			return slog.String(a.Key, cut(s, max))
		}
		return slog.Attr{Key: a.Key, Value: v}
	case slog.KindGroup:
		g := v.Group()
		b := make([]slog.Attr, len(g))
		for i, m := range g {
			b[i] = bound(m, max)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(b...)}
	case slog.KindAny:
		if s, ok := text(v.Any()); ok && len(s) > max {
			return slog.String(a.Key, cut(s, max))
		}
		return slog.Attr{Key: a.Key, Value: v}
	default:
		return slog.Attr{Key: a.Key, Value: v}
	}
}

// text is how the standard handlers print x, where that can be long. A method that panics
// (a nil pointer's String, say) leaves x as it is, for the handler to report as it does.
func text(x any) (s string, ok bool) {
	defer func() {
		if recover() != nil {
			s, ok = "", false
		}
	}()
	switch x := x.(type) {
	case nil:
		return "", false
	case error:
		return x.Error(), true
	case []byte:
		return string(x), true
	case encoding.TextMarshaler:
		b, err := x.MarshalText()
		if err != nil {
			return err.Error(), true
		}
		return string(b), true
	case fmt.Stringer:
		return x.String(), true
	default:
		return fmt.Sprintf("%+v", x), true
	}
}

// cut is s cut to max bytes at a rune boundary, with "…[N bytes cut]" when it was longer.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…[" + strconv.Itoa(len(s)-n) + " bytes cut]"
}
