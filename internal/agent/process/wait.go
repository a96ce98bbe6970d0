package process

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// readyTimeout is the error of a wait that timed out.
func readyTimeout(d time.Duration) error {
	return errdefs.Newf(errdefs.CodeProcessReadyTimeout, "not ready after %d ms", d.Milliseconds()).
		With("timeoutMs", d.Milliseconds())
}

// exitedEarly is the error of a wait whose process ended first: "process web exited with code
// 9 before it was ready" (status error, without an exit code: "process web ended with status
// error before it was ready: …").
func exitedEarly(info Info) error {
	var e *errdefs.Error
	if info.ExitCode != nil {
		e = errdefs.Newf(errdefs.CodeProcessExitedEarly, "process %s exited with code %d before it was ready",
			info.ID, *info.ExitCode).With("exitCode", *info.ExitCode)
	} else {
		e = errdefs.Newf(errdefs.CodeProcessExitedEarly, "process %s ended with status %s before it was ready: %s",
			info.ID, info.Status, cmp.Or(info.Error, "no exit code"))
	}
	return e.With("processId", info.ID).With("status", string(info.Status))
}

// withTimeout returns ctx limited to d (0 = no limit), ending with readyTimeout(d).
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, d, readyTimeout(d))
}

// LogWait is what WaitLog looks for.
type LogWait struct {
	// Pattern is an RE2 regular expression, Text a literal substring: exactly one is set.
	Pattern string
	Text    string
	// Stream is "stdout", "stderr" or "both" (empty means both).
	Stream string
	// Timeout > 0 bounds the wait.
	Timeout time.Duration
}

// LogMatch is the line WaitLog found.
type LogMatch struct {
	// Line is the matching line without its "\n" (and a "\r" before it), ANSI escapes removed.
	Line string
	// Match is the whole match then each capture group ("" for one that did not take part);
	// for Text, just Text.
	Match []string
	// Groups maps the named groups to their values; nil when there are none.
	Groups map[string]string
	Stream Stream
}

// maxLine bounds a line WaitLog matches, in bytes; the rest of a longer line is not matched.
const maxLine = 256 << 10

// ansiEscape matches terminal escape sequences: CSI (colours, cursor moves), OSC (titles,
// links) and the two- and three-byte forms.
var ansiEscape = regexp.MustCompile("\x1b\\[[0-?]*[ -/]*[@-~]|\x1b\\][^\x07\x1b]*(?:\x07|\x1b\\\\)|\x1b[ -/]+[0-~]|\x1b[@-Z\\\\^_]")

// WaitLog waits for a line of process id's output (held output first, then live output)
// that matches w. Lines are matched whole, without the "\n", with ANSI escapes removed; the
// final line without a "\n" counts once the process has ended. A line cut by a dropped part of
// the log is skipped.
//
// Errors: VALIDATION_FAILED (not exactly one of Pattern and Text, a bad Stream, a negative
// Timeout), INVALID_PATTERN, PROCESS_NOT_FOUND, PROCESS_READY_TIMEOUT (context: timeoutMs),
// PROCESS_EXITED_BEFORE_READY (context: processId, exitCode, status), or the cause of ctx.
func (m *Manager) WaitLog(ctx context.Context, id string, w LogWait) (LogMatch, error) {
	if (w.Pattern == "") == (w.Text == "") {
		return LogMatch{}, errdefs.New(errdefs.CodeInvalidArgument, "give exactly one of pattern and text")
	}
	var re *regexp.Regexp
	if w.Pattern != "" {
		var err error
		if re, err = regexp.Compile(w.Pattern); err != nil {
			return LogMatch{}, errdefs.Wrap(errdefs.CodeInvalidPattern, err, "invalid pattern").With("pattern", w.Pattern)
		}
	}
	var want [2]bool
	switch w.Stream {
	case "", "both":
		want = [2]bool{true, true}
	case "stdout":
		want[Stdout] = true
	case "stderr":
		want[Stderr] = true
	default:
		return LogMatch{}, errdefs.Newf(errdefs.CodeInvalidArgument, "stream %q: want stdout, stderr or both", w.Stream)
	}
	if w.Timeout < 0 {
		return LogMatch{}, errdefs.New(errdefs.CodeInvalidArgument, "timeoutMs is negative")
	}
	p, err := m.lookup(id)
	if err != nil {
		return LogMatch{}, err
	}
	f, err := p.follow([2]int64{}, want)
	if err != nil {
		return LogMatch{}, err
	}
	ctx, cancel := withTimeout(ctx, w.Timeout)
	defer cancel()

	match := func(s Stream, raw []byte) (LogMatch, bool) {
		raw = bytes.TrimSuffix(raw, []byte("\r"))
		line := string(ansiEscape.ReplaceAll(raw, nil))
		if re == nil {
			if strings.Contains(line, w.Text) {
				return LogMatch{Line: line, Match: []string{w.Text}, Stream: s}, true
			}
			return LogMatch{}, false
		}
		sub := re.FindStringSubmatch(line)
		if sub == nil {
			return LogMatch{}, false
		}
		lm := LogMatch{Line: line, Match: sub, Stream: s}
		for i, name := range re.SubexpNames() {
			if name != "" {
				if lm.Groups == nil {
					lm.Groups = map[string]string{}
				}
				lm.Groups[name] = sub[i]
			}
		}
		return lm, true
	}
	type lineState struct {
		buf  []byte
		skip bool // inside a line whose start was dropped
	}
	var lines [2]lineState
	for {
		ev, err := f.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return LogMatch{}, err
		}
		switch ev.Kind {
		case KindDropped:
			lines[ev.Stream] = lineState{skip: true}
		case KindOutput:
			ls := &lines[ev.Stream]
			data := ev.Data
			for len(data) > 0 {
				i := bytes.IndexByte(data, '\n')
				part := data
				if i >= 0 {
					part = data[:i]
				}
				if !ls.skip && len(ls.buf) < maxLine {
					ls.buf = append(ls.buf, part[:min(len(part), maxLine-len(ls.buf))]...)
				}
				if i < 0 {
					break
				}
				if !ls.skip {
					if lm, ok := match(ev.Stream, ls.buf); ok {
						return lm, nil
					}
				}
				ls.buf, ls.skip = ls.buf[:0], false
				data = data[i+1:]
			}
		case KindExit:
			for _, s := range []Stream{Stdout, Stderr} {
				if ls := lines[s]; !ls.skip && len(ls.buf) > 0 {
					if lm, ok := match(s, ls.buf); ok {
						return lm, nil
					}
				}
			}
			return LogMatch{}, exitedEarly(ev.Info)
		}
	}
	return LogMatch{}, exitedEarly(p.snapshot())
}

// PortWait is what WaitPort waits for.
type PortWait struct {
	// Port is 1–65535 (else INVALID_PORT).
	Port int
	// Mode is "http" (the default: an HTTP GET must answer with a status in range) or "tcp"
	// (a connection must be accepted).
	Mode string
	// Path of the GET, starting with "/"; empty means "/".
	Path string
	// StatusMin and StatusMax bound the accepted HTTP status; 0 means 200 and 399.
	StatusMin, StatusMax int
	// Interval between attempts; 0 means 500 ms; clamped to 100 ms–10 s.
	Interval time.Duration
	// Timeout > 0 bounds the wait.
	Timeout time.Duration
}

// PortReady is the result of WaitPort.
type PortReady struct {
	Port int
	// StatusCode is the HTTP status of the accepting answer (0 in tcp mode).
	StatusCode int
}

// attemptTimeout bounds one check of WaitPort.
const attemptTimeout = 5 * time.Second

// WaitPort waits until process id serves w.Port inside the sandbox: it connects to
// 127.0.0.1, then ::1, every Interval (each attempt bounded by 5 s), in tcp mode until a
// connection is accepted, in http mode until `GET http://localhost:<port><path>` (redirects
// not followed) answers with a status in range.
//
// Errors: INVALID_PORT (context: port), VALIDATION_FAILED (mode, path, status range, negative
// timeout), PROCESS_NOT_FOUND, PROCESS_READY_TIMEOUT, PROCESS_EXITED_BEFORE_READY (at once
// when the process has ended, or ends during the wait), or the cause of ctx.
func (m *Manager) WaitPort(ctx context.Context, id string, w PortWait) (PortReady, error) {
	if w.Port < 1 || w.Port > 65535 {
		return PortReady{}, errdefs.Newf(errdefs.CodeInvalidPort, "port %d outside 1-65535", w.Port).With("port", w.Port)
	}
	if w.Mode == "" {
		w.Mode = "http"
	}
	if w.Mode != "http" && w.Mode != "tcp" {
		return PortReady{}, errdefs.Newf(errdefs.CodeInvalidArgument, "mode %q: want http or tcp", w.Mode)
	}
	if w.Path == "" {
		w.Path = "/"
	}
	if !strings.HasPrefix(w.Path, "/") || strings.ContainsFunc(w.Path, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return PortReady{}, errdefs.Newf(errdefs.CodeInvalidArgument, "path %q must start with / and hold no spaces or control characters", w.Path)
	}
	if w.StatusMin == 0 {
		w.StatusMin = 200
	}
	if w.StatusMax == 0 {
		w.StatusMax = 399
	}
	if w.StatusMin < 100 || w.StatusMax > 599 || w.StatusMin > w.StatusMax {
		return PortReady{}, errdefs.Newf(errdefs.CodeInvalidArgument, "status range %d-%d: want 100 ≤ min ≤ max ≤ 599", w.StatusMin, w.StatusMax)
	}
	if w.Interval == 0 {
		w.Interval = 500 * time.Millisecond
	}
	w.Interval = min(max(w.Interval, 100*time.Millisecond), 10*time.Second)
	if w.Timeout < 0 {
		return PortReady{}, errdefs.New(errdefs.CodeInvalidArgument, "timeoutMs is negative")
	}
	p, err := m.lookup(id)
	if err != nil {
		return PortReady{}, err
	}
	ctx, cancel := m.untilEnd(ctx, p, w.Timeout)
	defer cancel()
	for {
		if p.ended() {
			return PortReady{}, exitedEarly(p.snapshot())
		}
		if code, ok := probe(ctx, w); ok {
			return PortReady{Port: w.Port, StatusCode: code}, nil
		}
		t := time.NewTimer(w.Interval)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if p.ended() {
				return PortReady{}, exitedEarly(p.snapshot())
			}
			return PortReady{}, context.Cause(ctx)
		}
	}
}

// untilEnd returns ctx limited by timeout (0 = none) that also ends when p ends.
func (m *Manager) untilEnd(ctx context.Context, p *proc, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancelTimeout := withTimeout(ctx, timeout)
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		// Exits when the wait is over or the process has ended.
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(); cancelTimeout() }
}

// loopbacks are the addresses WaitPort tries, in order.
var loopbacks = []string{"127.0.0.1", "::1"}

// dialLoopback connects to port on 127.0.0.1, then ::1.
func dialLoopback(ctx context.Context, port int) (net.Conn, error) {
	var d net.Dialer
	var firstErr error
	for _, host := range loopbacks {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// probe makes one attempt of WaitPort.
func probe(ctx context.Context, w PortWait) (status int, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	if w.Mode == "tcp" {
		c, err := dialLoopback(ctx, w.Port)
		if err != nil {
			return 0, false
		}
		c.Close()
		return 0, true
	}
	client := &http.Client{
		Transport: &http.Transport{
			DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return dialLoopback(ctx, w.Port) },
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost:"+strconv.Itoa(w.Port)+w.Path, nil)
	if err != nil {
		return 0, false
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, resp.StatusCode >= w.StatusMin && resp.StatusCode <= w.StatusMax
}

// WaitExit waits until process id has ended and returns its final record. Errors:
// PROCESS_NOT_FOUND, VALIDATION_FAILED (negative timeout), PROCESS_READY_TIMEOUT, or the cause
// of ctx.
func (m *Manager) WaitExit(ctx context.Context, id string, timeout time.Duration) (Info, error) {
	if timeout < 0 {
		return Info{}, errdefs.New(errdefs.CodeInvalidArgument, "timeoutMs is negative")
	}
	p, err := m.lookup(id)
	if err != nil {
		return Info{}, err
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	select {
	case <-p.done:
		return p.snapshot(), nil
	case <-ctx.Done():
		return Info{}, context.Cause(ctx)
	}
}
