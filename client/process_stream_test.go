package client

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// fastReconnects shortens the reconnection backoff for one test.
func fastReconnects(t *testing.T) {
	old := streamBackoff
	streamBackoff = time.Millisecond
	t.Cleanup(func() { streamBackoff = old })
}

// collected is what a full range over StreamLogs produced.
type collected struct {
	events         []LogEvent
	stdout, stderr []byte
	err            error
	errs           int
}

func collect(ctx context.Context, p *Process, from LogOffsets) collected {
	var c collected
	for ev, err := range p.StreamLogs(ctx, from) {
		if err != nil {
			c.err = err
			c.errs++
			continue
		}
		c.events = append(c.events, ev)
		switch ev.Type {
		case LogEventStdout:
			c.stdout = append(c.stdout, ev.Data...)
		case LogEventStderr:
			c.stderr = append(c.stderr, ev.Data...)
		}
	}
	return c
}

// testChunks is output with text, multi-byte characters and a non-UTF-8 (base64) chunk.
func testChunks() []chunk {
	return []chunk{
		{"stdout", []byte("server starting\n")},
		{"stderr", []byte("warn: héllo\n")},
		{"stdout", []byte{0xff, 0x00, 0xfe, '\n'}},
		{"stdout", []byte("listening on :3000\n")},
		{"stderr", []byte("second warning\n")},
		{"stdout", []byte("GET / 200\n")},
		{"stdout", []byte("GET /x 404\n")},
	}
}

// checkComplete checks a stream that reached exit with exactly the fake's output.
func checkComplete(t *testing.T, f *fakeProcs, c collected) {
	t.Helper()
	if c.err != nil {
		t.Fatalf("StreamLogs yielded error %v", c.err)
	}
	if !bytes.Equal(c.stdout, f.output("stdout")) || !bytes.Equal(c.stderr, f.output("stderr")) {
		t.Errorf("streamed stdout %q stderr %q; want %q and %q", c.stdout, c.stderr, f.output("stdout"), f.output("stderr"))
	}
	infos := 0
	for _, ev := range c.events {
		if ev.Type == LogEventProcessInfo {
			infos++
		}
	}
	if infos != 1 || c.events[0].Type != LogEventProcessInfo {
		t.Errorf("%d process_info events, first event %q; want exactly one, first", infos, c.events[0].Type)
	}
	last := c.events[len(c.events)-1]
	if last.Type != LogEventExit || last.ExitCode != 0 || last.Status != ProcessCompleted ||
		last.Message != "Process completed with exit code 0" {
		t.Errorf("last event = %+v; want exit 0", last)
	}
}

func TestStreamLogs(t *testing.T) {
	f := newFakeProcs(t, testChunks()...)
	c := newTestClient(t, f.handler())
	p := c.SandboxHandle("box").Process("web")
	got := collect(t.Context(), p, LogOffsets{})
	checkComplete(t, f, got)

	info := got.events[0]
	if info.PID != 42 || info.Command != "npm run dev" || info.Status != ProcessRunning || info.ProcessID != "web" ||
		info.Timestamp.IsZero() {
		t.Errorf("process_info = %+v", info)
	}
	// Offsets are absolute per stream, and the binary chunk arrives decoded.
	var offs []int64
	for _, ev := range got.events {
		if ev.Type == LogEventStdout {
			offs = append(offs, ev.Offset)
			if ev.Stream != "stdout" {
				t.Errorf("stdout event Stream = %q", ev.Stream)
			}
		}
	}
	if want := []int64{0, 16, 20, 39, 49}; !equalInts(offs, want) {
		t.Errorf("stdout offsets = %v; want %v", offs, want)
	}
	if !bytes.Equal(got.events[3].Data, []byte{0xff, 0x00, 0xfe, '\n'}) {
		t.Errorf("binary chunk = %q", got.events[3].Data)
	}
	if q := f.streamQueries[0]; len(q) != 0 {
		t.Errorf("stream from zero sent query %v; want none", q)
	}
	if i := p.Info(); i.Status != ProcessCompleted || i.ExitCode == nil || *i.ExitCode != 0 {
		t.Errorf("Info after exit = %+v", i)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestStreamLogsReconnects cuts the connection mid-stream, cleanly and by aborting it; the
// iterator resumes from its offsets and the caller gets every byte exactly once.
func TestStreamLogsReconnects(t *testing.T) {
	fastReconnects(t)
	tests := []struct {
		name     string
		cutEvery int
		cuts     int
		abort    bool
		rewind   int64
	}{
		{name: "clean end after 2 frames, every time", cutEvery: 2, cuts: -1},
		{name: "abort after 3 frames, twice", cutEvery: 3, cuts: 2, abort: true},
		{name: "after every frame", cutEvery: 1, cuts: -1, abort: true},
		{name: "server resends old bytes", cutEvery: 3, cuts: -1, rewind: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeProcs(t, testChunks()...)
			f.cutEvery, f.cuts, f.abort, f.rewind = tt.cutEvery, tt.cuts, tt.abort, tt.rewind
			c := newTestClient(t, f.handler())
			got := collect(t.Context(), c.SandboxHandle("box").Process("web"), LogOffsets{})
			checkComplete(t, f, got)
			if len(f.streamQueries) < 2 {
				t.Fatalf("%d connections; want reconnections", len(f.streamQueries))
			}
			// The second connection asked for exactly the offsets reached by the first.
			q := f.streamQueries[1]
			wantQ := url.Values{"stdoutOffset": {"16"}, "stderrOffset": {"13"}} // after 2 frames
			switch tt.cutEvery {
			case 1:
				wantQ = url.Values{"stdoutOffset": {"16"}, "stderrOffset": {"0"}}
			case 3:
				wantQ = url.Values{"stdoutOffset": {"20"}, "stderrOffset": {"13"}}
			}
			if q.Encode() != wantQ.Encode() {
				t.Errorf("second connection query = %v; want %v", q, wantQ)
			}
		})
	}
}

func TestStreamLogsFromOffsets(t *testing.T) {
	f := newFakeProcs(t, testChunks()...)
	c := newTestClient(t, f.handler())
	p := c.SandboxHandle("box").Process("web")
	out, errOut := f.output("stdout"), f.output("stderr")
	got := collect(t.Context(), p, LogOffsets{Stdout: 30, Stderr: 13})
	if got.err != nil || !bytes.Equal(got.stdout, out[30:]) || !bytes.Equal(got.stderr, errOut[13:]) {
		t.Errorf("from {30 13} = %q %q, %v; want %q %q", got.stdout, got.stderr, got.err, out[30:], errOut[13:])
	}
	if q := f.streamQueries[0]; q.Get("stdoutOffset") != "30" || q.Get("stderrOffset") != "13" {
		t.Errorf("query = %v", q)
	}
	if got.events[1].Offset != 30 {
		t.Errorf("first chunk offset = %d; want 30", got.events[1].Offset)
	}

	// Logs then StreamLogs from Logs.Next: nothing but the exit.
	logs, err := p.Logs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got = collect(t.Context(), p, logs.Next())
	if got.err != nil || len(got.events) != 2 || got.events[1].Type != LogEventExit {
		t.Errorf("stream after Logs = %+v, %v", got.events, got.err)
	}
}

func TestStreamLogsDropped(t *testing.T) {
	fastReconnects(t)
	f := newFakeProcs(t, testChunks()...)
	f.held = LogOffsets{Stdout: 20, Stderr: 0}
	f.cutEvery, f.cuts = 2, -1
	c := newTestClient(t, f.handler())
	got := collect(t.Context(), c.SandboxHandle("box").Process("web"), LogOffsets{})
	if got.err != nil {
		t.Fatal(got.err)
	}
	var dropped []LogEvent
	for _, ev := range got.events {
		if ev.Type == LogEventDropped {
			dropped = append(dropped, ev)
		}
	}
	if len(dropped) != 1 || dropped[0].Stream != "stdout" || dropped[0].From != 0 || dropped[0].To != 20 {
		t.Errorf("dropped events = %+v; want one, stdout 0–20", dropped)
	}
	if out := f.output("stdout"); !bytes.Equal(got.stdout, out[20:]) || !bytes.Equal(got.stderr, f.output("stderr")) {
		t.Errorf("streamed %q %q", got.stdout, got.stderr)
	}
}

// TestStreamLogsGivesUp: a stream that keeps being cut without output ends with
// STREAM_INCOMPLETE after the bounded retries, never with a clean end.
func TestStreamLogsGivesUp(t *testing.T) {
	fastReconnects(t)
	f := newFakeProcs(t, testChunks()...)
	f.cutEvery, f.cuts = 1, 1 // the first connection delivers one chunk
	f.refuseAfter, f.refuseErr = 1, errdefs.New(errdefs.CodeAgentUnavailable, "agent restarting")
	c := newTestClient(t, f.handler())
	got := collect(t.Context(), c.SandboxHandle("box").Process("web"), LogOffsets{})
	if got.errs != 1 || !errdefs.IsCode(got.err, errdefs.CodeStreamIncomplete) || !errors.Is(got.err, errdefs.ErrUnavailable) {
		t.Fatalf("StreamLogs = %d errors, last %v; want one STREAM_INCOMPLETE", got.errs, got.err)
	}
	if !errdefs.IsCode(got.err, errdefs.CodeAgentUnavailable) {
		t.Errorf("error %v does not carry its cause AGENT_UNAVAILABLE", got.err)
	}
	if last := got.events[len(got.events)-1]; last.Type == LogEventExit {
		t.Error("an exit event was yielded")
	}
	if n := len(f.streamQueries); n != 1+streamReconnects {
		t.Errorf("%d connections; want %d", n, 1+streamReconnects)
	}
	var e *errdefs.Error
	if errors.As(got.err, &e); e.Context["stdoutOffset"] != int64(16) {
		t.Errorf("error context = %v; want stdoutOffset 16", e.Context)
	}

	// A stream that ends cleanly without exit, every time, also gives up.
	f = newFakeProcs(t, chunk{"stdout", []byte("x")})
	f.endEarly = true
	c = newTestClient(t, f.handler())
	got = collect(t.Context(), c.SandboxHandle("box").Process("web"), LogOffsets{})
	if !errdefs.IsCode(got.err, errdefs.CodeStreamIncomplete) || string(got.stdout) != "x" {
		t.Errorf("endless cuts = %q, %v; want x then STREAM_INCOMPLETE", got.stdout, got.err)
	}
}

func TestStreamLogsReconnectRefused(t *testing.T) {
	fastReconnects(t)
	f := newFakeProcs(t, testChunks()...)
	f.cutEvery, f.cuts = 2, -1
	f.refuseAfter, f.refuseErr = 1, errdefs.New(errdefs.CodeProcessNotFound, "process web not found")
	c := newTestClient(t, f.handler())
	got := collect(t.Context(), c.SandboxHandle("box").Process("web"), LogOffsets{})
	if !errdefs.IsCode(got.err, errdefs.CodeStreamIncomplete) || !errdefs.IsCode(got.err, errdefs.CodeProcessNotFound) {
		t.Errorf("refused reconnection = %v; want STREAM_INCOMPLETE caused by PROCESS_NOT_FOUND", got.err)
	}
	if len(f.streamQueries) != 2 {
		t.Errorf("%d connections; want 2 (no retry of a definitive refusal)", len(f.streamQueries))
	}
}

func TestStreamLogsFirstConnectionError(t *testing.T) {
	f := newFakeProcs(t)
	c := newTestClient(t, f.handler())
	got := collect(t.Context(), c.SandboxHandle("box").Process("ghost"), LogOffsets{})
	if got.errs != 1 || !errdefs.IsCode(got.err, errdefs.CodeProcessNotFound) || errdefs.IsCode(got.err, errdefs.CodeStreamIncomplete) {
		t.Errorf("StreamLogs(ghost) = %v; want PROCESS_NOT_FOUND as is", got.err)
	}
	if !strings.Contains(got.err.Error(), `process "ghost" of sandbox "box"`) {
		t.Errorf("error %q lacks context", got.err)
	}
}

func TestStreamLogsCancelAndBreak(t *testing.T) {
	f := newFakeProcs(t, testChunks()...)
	f.released = make(chan struct{}) // the stream stays open after its output
	c := newTestClient(t, f.handler())
	p := c.SandboxHandle("box").Process("web")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var lastErr error
	n := 0
	for ev, err := range p.StreamLogs(ctx, LogOffsets{}) {
		if err != nil {
			lastErr = err
			n++
			continue
		}
		if ev.Type == LogEventStdout && strings.Contains(string(ev.Data), "404") {
			cancel()
		}
	}
	if n != 1 || !errors.Is(lastErr, context.Canceled) || !errdefs.IsCode(lastErr, errdefs.CodeStreamIncomplete) {
		t.Errorf("cancelled stream = %d errors, %v; want STREAM_INCOMPLETE wrapping context.Canceled", n, lastErr)
	}

	// Breaking out yields nothing more and does not reconnect.
	before := len(f.streamQueries)
	for ev, err := range p.StreamLogs(t.Context(), LogOffsets{}) {
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
		if ev.Type == LogEventStdout {
			break
		}
	}
	if len(f.streamQueries) != before+1 {
		t.Errorf("%d connections after break; want 1", len(f.streamQueries)-before)
	}
	close(f.released)
}

func TestStreamLogsTo(t *testing.T) {
	fastReconnects(t)
	f := newFakeProcs(t, testChunks()...)
	f.cutEvery, f.cuts, f.abort = 2, -1, true
	f.held = LogOffsets{Stderr: 5}
	c := newTestClient(t, f.handler())
	var out, errOut bytes.Buffer
	var drops []LogEvent
	ex, err := c.SandboxHandle("box").Process("web").StreamLogsTo(t.Context(), LogOffsets{}, &out, &errOut,
		func(ev LogEvent) { drops = append(drops, ev) })
	if err != nil || ex != (ExitInfo{ProcessID: "web", ExitCode: 0, Status: ProcessCompleted}) {
		t.Fatalf("StreamLogsTo = %+v, %v", ex, err)
	}
	if !bytes.Equal(out.Bytes(), f.output("stdout")) || !bytes.Equal(errOut.Bytes(), f.output("stderr")[5:]) {
		t.Errorf("StreamLogsTo wrote %q %q", out.Bytes(), errOut.Bytes())
	}
	if len(drops) != 1 || drops[0].Stream != "stderr" || drops[0].To != 5 {
		t.Errorf("dropped callbacks = %+v", drops)
	}
}

// TestLogStreamTrimsOverlap feeds events that overlap what was already yielded, as a
// non-conforming server could send; no byte is yielded twice and offsets stay exact.
func TestLogStreamTrimsOverlap(t *testing.T) {
	c := newTestClient(t, newFakeProcs(t).handler())
	ls := &logStream{p: c.SandboxHandle("box").Process("web"), next: LogOffsets{Stdout: 10, Stderr: 4}}
	tests := []struct {
		w        logEventWire
		emit     bool
		data     string
		offset   int64
		wantNext LogOffsets
	}{
		{logEventWire{Type: "stdout", Data: "0123456789", Offset: 0}, false, "", 0, LogOffsets{10, 4}},
		{logEventWire{Type: "stdout", Data: "789abc", Offset: 7}, true, "abc", 10, LogOffsets{13, 4}},
		{logEventWire{Type: "stderr", Data: "QUJDREVG", Encoding: "base64", Offset: 2}, true, "CDEF", 4, LogOffsets{13, 8}},
		{logEventWire{Type: "dropped", Stream: "stdout", From: 0, To: 12}, false, "", 0, LogOffsets{13, 8}},
		{logEventWire{Type: "dropped", Stream: "stderr", From: 6, To: 20}, true, "", 0, LogOffsets{13, 20}},
		{logEventWire{Type: "stdout", Data: "gap", Offset: 30}, true, "gap", 30, LogOffsets{33, 20}},
	}
	for i, tt := range tests {
		ev, emit, err := ls.event(tt.w)
		if err != nil || emit != tt.emit || (emit && ev.Type != "dropped" && (string(ev.Data) != tt.data || ev.Offset != tt.offset)) ||
			ls.next != tt.wantNext {
			t.Errorf("event %d (%+v) = %+v, emit %v, %v; next %+v; want emit %v data %q at %d, next %+v",
				i, tt.w, ev, emit, err, ls.next, tt.emit, tt.data, tt.offset, tt.wantNext)
		}
		if ev.Type == "dropped" && emit && (ev.From != 8 || ev.To != 20) {
			t.Errorf("dropped event = %+v; want from 8 (what was seen) to 20", ev)
		}
	}
	if _, _, err := ls.event(logEventWire{Type: "stdout", Data: "!!", Encoding: "base64"}); !errors.Is(err, errdefs.ErrInternal) {
		t.Errorf("bad base64 = %v; want ErrInternal", err)
	}
	if _, _, err := ls.event(logEventWire{Type: "exit"}); !errors.Is(err, errdefs.ErrInternal) {
		t.Errorf("exit without code = %v; want ErrInternal", err)
	}
	if _, emit, err := ls.event(logEventWire{Type: "future"}); emit || err != nil {
		t.Errorf("unknown event = %v, %v; want skipped", emit, err)
	}
	_, _, err := ls.event(logEventWire{Type: "error", Code: errdefs.CodeAgentUnavailable, Error: "agent gone"})
	if !errdefs.IsCode(err, errdefs.CodeAgentUnavailable) {
		t.Errorf("error event = %v; want AGENT_UNAVAILABLE", err)
	}
}
