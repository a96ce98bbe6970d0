package logbound

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/testutil"
)

// clock is a settable clock for the rate limit.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type stringer struct{ s string }

func (s stringer) String() string { return s.s }

type long struct{ s string } // printed by %+v

// newTest returns a bounded logger writing slog's text format into buf.
func newTest(opt Options) (*slog.Logger, *Handler, *bytes.Buffer, *clock) {
	var buf bytes.Buffer
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	opt.Now = c.now
	h := New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), opt)
	return slog.New(h), h, &buf, c
}

// TestTruncation: every kind of value sandbox code can fill (string, []byte, error,
// Stringer, TextMarshaler, any other value, group members, With attributes, the message) is
// cut to MaxValue with a marker counting the bytes cut; short values print exactly as the
// plain text handler prints them.
func TestTruncation(t *testing.T) {
	const max = 100
	big := strings.Repeat("x", 60_000)
	marker := "…[" + strconv.Itoa(60_000-max) + " bytes cut]"
	cases := []struct {
		name string
		log  func(l *slog.Logger)
		want string // a part of the line
	}{
		{"string", func(l *slog.Logger) { l.Info("m", "target", big) }, "target=\"" + big[:max] + marker + "\""},
		{"bytes", func(l *slog.Logger) { l.Info("m", "body", []byte(big)) }, "body=\"" + big[:max] + marker + "\""},
		{"error", func(l *slog.Logger) { l.Info("m", "err", errors.New(big)) }, "err=\"" + big[:max] + marker + "\""},
		{"stringer", func(l *slog.Logger) { l.Info("m", "s", stringer{big}) }, "s=\"" + big[:max] + marker + "\""},
		{"struct", func(l *slog.Logger) { l.Info("m", "v", long{big[:60_000-4]}) }, "v=\"{s:" + big[:max-3] + marker + "\""},
		{"group", func(l *slog.Logger) { l.Info("m", slog.Group("req", "host", big)) }, "req.host=\"" + big[:max] + marker + "\""},
		{"with", func(l *slog.Logger) { l.With("host", big).Info("m") }, "host=\"" + big[:max] + marker + "\""},
		{"with group", func(l *slog.Logger) { l.WithGroup("g").With("host", big).Info("m") }, "g.host=\"" + big[:max] + marker + "\""},
		{"message", func(l *slog.Logger) { l.Info(big) }, "msg=\"" + big[:max] + marker + "\""},
		{"valuer", func(l *slog.Logger) { l.Info("m", "v", slog.StringValue(big)) }, "v=\"" + big[:max] + marker + "\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, _, buf, _ := newTest(Options{MaxValue: max, Rate: -1})
			c.log(l)
			out := buf.String()
			if !strings.Contains(out, c.want) {
				t.Errorf("line (%d bytes) lacks %q:\n%.400s", len(out), c.want[len(c.want)-40:], out)
			}
			if len(out) > 400 {
				t.Errorf("line is %d bytes; want at most 400", len(out))
			}
		})
	}
	t.Run("utf-8 boundary", func(t *testing.T) {
		l, _, buf, _ := newTest(Options{MaxValue: max, Rate: -1})
		l.Info("m", "v", "a"+strings.Repeat("é", 100)) // 'é' is 2 bytes: byte 100 is inside one
		if want := `v="a` + strings.Repeat("é", 49) + `…[102 bytes cut]"`; !strings.Contains(buf.String(), want) {
			t.Errorf("line %q lacks %q", buf.String(), want)
		}
	})
	t.Run("short values unchanged", func(t *testing.T) {
		var plain bytes.Buffer
		ref := slog.New(slog.NewTextHandler(&plain, nil))
		l, _, buf, _ := newTest(Options{MaxValue: max, Rate: -1})
		at := netip.MustParseAddrPort("10.88.0.2:80")
		for _, lg := range []*slog.Logger{ref, l} {
			lg.With("sandbox_id", "sb1").WithGroup("g").Info("egress request", "host", "example.com", "n", 3,
				"err", errors.New("refused"), "addr", at, "took", time.Second, "list", []string{"a", "b"})
		}
		strip := func(s string) string { _, rest, _ := strings.Cut(s, " "); return rest } // time=
		if strip(buf.String()) != strip(plain.String()) {
			t.Errorf("bounded:\n%s\nplain:\n%s", buf.String(), plain.String())
		}
	})
}

// TestRateLimitPerSandbox: a sandbox gets Burst lines, then Rate per second, at each level;
// another sandbox's budget and lines about no sandbox are unaffected; the sandbox is found in
// the record's attributes and in With's.
func TestRateLimitPerSandbox(t *testing.T) {
	l, _, buf, clk := newTest(Options{Rate: 5, Burst: 10, Summary: time.Hour})
	count := func(s string) int { return strings.Count(buf.String(), s) }
	for i := range 100 {
		l.Info("flood a", "sandbox_id", "a", "i", i)
		l.With("component", "egress", "sandbox_id", "b").Info("flood b")
		l.Info("hutchd line")
	}
	if n := count("flood a"); n != 10 {
		t.Errorf("sandbox a: %d lines; want the burst, 10", n)
	}
	if n := count("flood b"); n != 10 {
		t.Errorf("sandbox b (With): %d lines; want 10", n)
	}
	for range 100 {
		l.Warn("memory guard: nothing to kill", "id", "c") //nolint:sloglint // the bound must hold for a line that names its sandbox "id"
	}
	if n := count("memory guard"); n != 10 {
		t.Errorf("sandbox c (key id): %d lines; want 10", n)
	}
	if n := count("hutchd line"); n != 100 {
		t.Errorf("lines without a sandbox: %d; want all 100", n)
	}
	for range 100 {
		l.Debug("debug a", "sandbox_id", "a")
	}
	l.Warn("sandbox a going to sleep", "sandbox_id", "a")
	if n := count("debug a"); n != 10 {
		t.Errorf("sandbox a at debug: %d lines; want a burst of its own, 10", n)
	}
	if n := count("sandbox a going to sleep"); n != 1 {
		t.Errorf("sandbox a's warning after floods at info and debug: %d lines; want 1", n)
	}
	clk.add(time.Second)
	for range 100 {
		l.Info("flood a", "sandbox_id", "a")
	}
	if n := count("flood a"); n != 15 {
		t.Errorf("sandbox a after 1 s: %d lines; want 10+5", n)
	}
}

// TestSummaryLine: suppressed lines are reported per sandbox with their count (all levels
// together), once the summary interval has passed (on the next line, or by Flush), and the counts restart.
func TestSummaryLine(t *testing.T) {
	l, h, buf, clk := newTest(Options{Rate: 1, Burst: 2, Summary: time.Minute})
	for range 50 {
		l.Info("flood", "sandbox_id", "a")
	}
	for range 4 {
		l.Info("flood", "sandbox_id", "b")
		l.Debug("flood", "sandbox_id", "b")
	}
	if strings.Contains(buf.String(), SummaryMessage) {
		t.Fatalf("summary before the interval:\n%s", buf.String())
	}
	clk.add(time.Minute)
	buf.Reset()
	l.Info("hutchd line")
	out := buf.String()
	for _, want := range []string{
		`level=WARN msg="log lines suppressed" sandbox_id=a suppressed=48 window=1m0s`,
		`level=WARN msg="log lines suppressed" sandbox_id=b suppressed=4 window=1m0s`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	for range 3 {
		l.Info("flood", "sandbox_id", "a") // 60 tokens came back, capped at 2: 2 pass, 1 suppressed
	}
	h.Flush(context.Background())
	if want := "sandbox_id=a suppressed=1 "; !strings.Contains(buf.String(), want) || strings.Contains(buf.String(), "sandbox_id=b suppressed") {
		t.Errorf("after Flush, want only %q:\n%s", want, buf.String())
	}
	buf.Reset()
	h.Flush(context.Background())
	if buf.Len() != 0 {
		t.Errorf("second Flush wrote %q; nothing was suppressed since", buf.String())
	}
}

// TestRunReportsSilentSandbox: Run writes the summary even when nothing is logged after
// the flood.
func TestRunReportsSilentSandbox(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	h := New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil), Options{Rate: 1, Burst: 1, Summary: 20 * time.Millisecond})
	l := slog.New(h)
	for range 5 {
		l.Info("flood", "sandbox_id", "a")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	var out string
	if !testutil.Poll(t, 10*time.Millisecond, 10*time.Second, func() bool {
		mu.Lock()
		out = buf.String()
		mu.Unlock()
		return strings.Contains(out, "sandbox_id=a suppressed=4 ")
	}) {
		t.Fatalf("no summary after 10 s:\n%s", out)
	}
	cancel()
	<-done
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestFloodFromOneSandbox replays the attack through the egress proxy's logging pattern: 200
// refused requests of one sandbox, each logging a 60 KB target (and the same host in With),
// write a few KiB, not 12 MB.
func TestFloodFromOneSandbox(t *testing.T) {
	l, h, buf, _ := newTest(Options{})
	target := "http://example.com/" + strings.Repeat("A", 60_000)
	for range 200 {
		l.With("sandbox_id", "sb1", "orig_dst", "93.184.216.34:80", "host", target[7:]).
			Info("egress: absolute-form request target refused", "target", target)
	}
	h.Flush(context.Background())
	out := buf.String()
	if len(out) > 128<<10 {
		t.Errorf("200 lines of a 60 KB target wrote %d bytes; want at most 128 KiB", len(out))
	}
	if want := fmt.Sprintf("suppressed=%d ", 200-DefaultBurst); !strings.Contains(out, want) {
		t.Errorf("no summary %q in the output", want)
	}
}
