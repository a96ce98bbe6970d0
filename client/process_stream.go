package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
)

// Process log stream event types (LogEvent.Type).
const (
	LogEventProcessInfo = "process_info"
	LogEventDropped     = "dropped"
	LogEventStdout      = "stdout"
	LogEventStderr      = "stderr"
	LogEventExit        = "exit"
)

// LogOffsets are absolute byte offsets in a process's stdout and stderr: the first byte not
// yet seen in each. The zero value means from the start of the output.
type LogOffsets struct {
	Stdout, Stderr int64
}

// LogEvent is one event of a process's log stream. Which fields are set depends on Type:
//   - "process_info" (once, first): PID, Command, Status (the state when the stream began).
//   - "dropped": Stream, and From–To, the byte range of Stream that the agent no longer held
//     when it was asked for it (lost to the log buffer's bound); the stream goes on from To.
//   - "stdout", "stderr": Stream (= Type), Data, the exact bytes of one chunk (at most 64 KiB,
//     decoded from base64 when the agent sent them so), and Offset, the absolute offset of
//     Data's first byte in its stream.
//   - "exit" (last): ExitCode (128+N for signal N), Status and Message (the agent's text,
//     e.g. "Process completed with exit code 0").
//
// ProcessID and Timestamp are set on every event the agent sent them on.
type LogEvent struct {
	Type      string
	ProcessID string
	Stream    string
	Data      []byte
	Offset    int64
	From, To  int64
	PID       int
	Command   string
	ExitCode  int
	Status    ProcessStatus
	Message   string
	Timestamp time.Time
}

type logEventWire = v1.ProcessEvent

// streamReconnects is how many reconnections in a row StreamLogs tries without receiving any
// output before it gives up, and streamBackoff the wait before the first of them (doubled for
// each next one). Tests shorten streamBackoff.
var (
	streamReconnects = 5
	streamBackoff    = 100 * time.Millisecond
)

// StreamLogs streams the process's output from the offsets from, then its live output until
// it exits (GET /v1/sandboxes/{id}/process/{pid}/stream?stdoutOffset=N&stderrOffset=M). A
// zero from starts at the beginning of the held output; ProcessLogs.Next resumes after a Logs
// call. Each range over the iterator opens its own stream.
//
// The sequence is: one "process_info" event, possibly "dropped" events (output lost to the
// log buffer before it could be sent), "stdout"/"stderr" events in the order the process wrote
// them, then exactly one terminal outcome:
//   - an "exit" event with a nil error, after which the iteration ends (a non-zero exit code
//     is not an error; it also updates the handle's Info);
//   - a zero LogEvent with a non-nil error.
//
// When the connection is cut before "exit" the iterator reconnects by itself from the offsets
// it has reached, so the caller sees every byte exactly once; it retries up to 5 times in a
// row (backoff 100 ms doubling) while no new output arrives. When it cannot go on (retries
// exhausted, a reconnection refused, e.g. PROCESS_NOT_FOUND once the record expired, or ctx
// cancelled) it yields an error of code STREAM_INCOMPLETE (class ErrUnavailable; the cause is
// in its chain, so errdefs.IsCode(err, errdefs.CodeProcessNotFound) and errors.Is(err,
// context.Canceled) still work) — never a clean end without "exit". Errors of the first
// connection (PROCESS_NOT_FOUND, SANDBOX_NOT_FOUND, UNAVAILABLE, …) are yielded as they are.
// Breaking out of the loop closes the stream; the process keeps running.
func (p *Process) StreamLogs(ctx context.Context, from LogOffsets) iter.Seq2[LogEvent, error] {
	return func(yield func(LogEvent, error) bool) {
		fail := func(err error) { yield(LogEvent{}, fmt.Errorf("stream logs of %s: %w", p.where(), err)) }
		if err := p.check(); err != nil {
			fail(err)
			return
		}
		ls := &logStream{p: p, next: from, yield: yield}
		failures := 0
		for attempt := 0; ; attempt++ {
			if attempt > 0 {
				if failures >= streamReconnects {
					fail(ls.incomplete(ctx, fmt.Sprintf("gave up after %d reconnections", failures)))
					return
				}
				if err := sleepCtx(ctx, streamBackoff<<failures); err != nil {
					fail(ls.incomplete(ctx, "interrupted"))
					return
				}
				failures++
			}
			res := ls.connect(ctx, attempt == 0)
			switch {
			case res.done:
				return
			case res.fatal != nil:
				fail(res.fatal)
				return
			}
			ls.lastErr = res.cut
			if ctx.Err() != nil {
				fail(ls.incomplete(ctx, "interrupted"))
				return
			}
			if res.progress {
				failures = 0
			}
			p.c.log.DebugContext(ctx, "hutch: process log stream cut, reconnecting", "process", p.id,
				"stdout_offset", ls.next.Stdout, "stderr_offset", ls.next.Stderr, "err", res.cut)
		}
	}
}

// logStream is the state of one StreamLogs iteration across its connections.
type logStream struct {
	p        *Process
	next     LogOffsets // offsets of the first bytes not yet yielded
	yield    func(LogEvent, error) bool
	sentInfo bool  // process_info was yielded
	lastErr  error // why the last connection ended
}

// connResult is how one connection of a log stream ended: done (exit yielded or the consumer
// stopped), fatal (an error to yield as is), or cut (reconnect).
type connResult struct {
	done     bool
	fatal    error
	cut      error
	progress bool // the connection delivered new output or a dropped range
}

// incomplete returns the STREAM_INCOMPLETE error of a stream that cannot go on.
func (ls *logStream) incomplete(ctx context.Context, why string) *errdefs.Error {
	cause := ls.lastErr
	if ctxErr := ctx.Err(); ctxErr != nil {
		cause = ctxErr
	}
	msg := fmt.Sprintf("log stream ended before the exit event (%s; at stdout offset %d, stderr offset %d)",
		why, ls.next.Stdout, ls.next.Stderr)
	if cause != nil && !errors.Is(cause, io.EOF) {
		msg += ": " + cause.Error()
	}
	e := errdefs.New(errdefs.CodeStreamIncomplete, msg).
		With("stdoutOffset", ls.next.Stdout).With("stderrOffset", ls.next.Stderr)
	e.Err = cause
	return e
}

// retryable reports whether a failed (re)connection may succeed later: hutchd or the agent
// unreachable or restarting, or a server-side failure.
func retryable(err error) bool {
	return errors.Is(err, errdefs.ErrUnavailable) || errors.Is(err, errdefs.ErrInternal)
}

// connect opens one connection from ls.next and yields its events.
func (ls *logStream) connect(ctx context.Context, first bool) connResult {
	p := ls.p
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := url.Values{}
	if ls.next.Stdout != 0 || ls.next.Stderr != 0 {
		q.Set("stdoutOffset", strconv.FormatInt(ls.next.Stdout, 10))
		q.Set("stderrOffset", strconv.FormatInt(ls.next.Stderr, 10))
	}
	resp, err := p.c.send(ctx, request{method: http.MethodGet, path: p.path("/stream"), query: q, accept: "text/event-stream"})
	if err != nil {
		switch {
		case first:
			return connResult{fatal: err}
		case ctx.Err() != nil || !retryable(err):
			ls.lastErr = err
			return connResult{fatal: ls.incomplete(ctx, "reconnection failed")}
		}
		return connResult{cut: err}
	}
	defer resp.Body.Close()
	r := sse.NewReader(resp.Body)
	var res connResult
	for {
		frame, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			res.cut = err
			return res
		}
		var w logEventWire
		if err := json.Unmarshal(frame, &w); err != nil {
			res.fatal = errdefs.Wrap(errdefs.CodeInternal, err, "decode process log event")
			return res
		}
		ev, emit, err := ls.event(w)
		if err != nil {
			res.fatal = err
			return res
		}
		if w.Type != LogEventProcessInfo && emit {
			res.progress = true
		}
		if emit && !ls.yield(ev, nil) {
			res.done = true
			return res
		}
		if ev.Type == LogEventExit {
			res.done = true
			return res
		}
	}
}

// event turns a wire event into the LogEvent to yield (emit false: nothing to yield) and
// advances the offsets. Output the caller has already seen, which a conforming server never
// resends, is trimmed so that no byte is yielded twice.
func (ls *logStream) event(w logEventWire) (ev LogEvent, emit bool, err error) {
	ev = LogEvent{Type: w.Type, ProcessID: w.ProcessID, Timestamp: w.Timestamp}
	switch w.Type {
	case LogEventProcessInfo:
		if ls.sentInfo {
			return ev, false, nil
		}
		ls.sentInfo = true
		ev.PID, ev.Command, ev.Status = w.PID, w.Command, w.Status
		return ev, true, nil
	case LogEventDropped:
		next := ls.offset(w.Stream)
		if next == nil {
			return ev, false, errdefs.Newf(errdefs.CodeInternal, "dropped event for unknown stream %q", w.Stream)
		}
		if w.To <= *next {
			return ev, false, nil
		}
		ev.Stream, ev.From, ev.To = w.Stream, max(w.From, *next), w.To
		*next = w.To
		return ev, true, nil
	case LogEventStdout, LogEventStderr:
		data, err := decodeData(w.Data, w.Encoding)
		if err != nil {
			return ev, false, errdefs.Wrap(errdefs.CodeInternal, err, "decode "+w.Type+" chunk")
		}
		next := ls.offset(w.Type)
		off := w.Offset
		if end := off + int64(len(data)); end <= *next {
			return ev, false, nil
		}
		if off < *next {
			data = data[*next-off:]
			off = *next
		}
		ev.Stream, ev.Data, ev.Offset = w.Type, data, off
		*next = off + int64(len(data))
		return ev, true, nil
	case LogEventExit:
		if w.ExitCode == nil {
			return ev, false, errdefs.New(errdefs.CodeInternal, "exit event without an exit code")
		}
		ev.ExitCode, ev.Status, ev.Message = *w.ExitCode, w.Status, w.Data
		ls.p.setExit(w.Status, *w.ExitCode)
		return ev, true, nil
	case "error":
		return ev, false, errdefs.Envelope{Code: w.Code, Message: w.Error, Context: w.Context}.Err()
	default:
		ls.p.c.log.Debug("hutch: skipping unknown process log event", "type", w.Type)
		return ev, false, nil
	}
}

// offset returns the offset counter of stream ("stdout" or "stderr"), or nil.
func (ls *logStream) offset(stream string) *int64 {
	switch stream {
	case LogEventStdout:
		return &ls.next.Stdout
	case LogEventStderr:
		return &ls.next.Stderr
	}
	return nil
}

// sleepCtx waits for d or until ctx is done, returning ctx's error then.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// StreamLogsTo copies the process's output from the offsets from until it exits, stdout
// chunks to stdout and stderr chunks to stderr (nil writers discard), reconnecting as
// StreamLogs does, and returns the process's exit information. onDropped, if not nil, is
// called for each "dropped" event. err is non-nil when the stream did not reach "exit"
// (STREAM_INCOMPLETE, a failed call) or a write failed.
func (p *Process) StreamLogsTo(ctx context.Context, from LogOffsets, stdout, stderr io.Writer, onDropped func(LogEvent)) (ExitInfo, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	for ev, err := range p.StreamLogs(ctx, from) {
		if err != nil {
			return ExitInfo{}, err
		}
		switch ev.Type {
		case LogEventStdout:
			if _, err := stdout.Write(ev.Data); err != nil {
				return ExitInfo{}, fmt.Errorf("logs of %s: write stdout: %w", p.where(), err)
			}
		case LogEventStderr:
			if _, err := stderr.Write(ev.Data); err != nil {
				return ExitInfo{}, fmt.Errorf("logs of %s: write stderr: %w", p.where(), err)
			}
		case LogEventDropped:
			if onDropped != nil {
				onDropped(ev)
			}
		case LogEventExit:
			return ExitInfo{ProcessID: p.id, ExitCode: ev.ExitCode, Status: ev.Status}, nil
		}
	}
	return ExitInfo{}, fmt.Errorf("logs of %s: %w", p.where(), errdefs.New(errdefs.CodeStreamIncomplete, "log stream ended before the exit event"))
}
