package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
)

// streamHandler serves execute/stream by sending events, then running end (which may be nil).
func streamHandler(t *testing.T, events []map[string]any, end func(w http.ResponseWriter, r *http.Request)) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/box/execute/stream", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			t.Errorf("Accept = %q", r.Header.Get("Accept"))
		}
		readJSON(t, r)
		sw := sse.NewWriter(w)
		for _, ev := range events {
			ev = maps.Clone(ev) // handler runs may overlap: never write the shared maps
			ev["timestamp"] = "2025-01-01T00:00:00Z"
			if err := sw.Send(ev); err != nil {
				t.Errorf("send: %v", err)
			}
		}
		if end != nil {
			end(w, r)
		}
	})
	return mux
}

func start() map[string]any {
	return map[string]any{"type": "start", "command": "cmd", "pid": 42, "sessionId": "default"}
}

func TestExecStreamComplete(t *testing.T) {
	bin := []byte{0xfe, 0xff, 0x00}
	events := []map[string]any{
		start(),
		{"type": "stdout", "data": "héllo "},
		{"type": "stderr", "data": "warn\n"},
		{"type": "stdout", "data": base64.StdEncoding.EncodeToString(bin), "encoding": "base64"},
		{"type": "future-kind", "data": "ignored"},
		{"type": "complete", "exitCode": 7, "duration": 12, "reason": "oom-killed"},
		{"type": "stdout", "data": "after the end"},
	}
	c := newTestClient(t, streamHandler(t, events, nil))
	var got []ExecEvent
	for ev, err := range c.SandboxHandle("box").ExecStream(t.Context(), "cmd", nil) {
		if err != nil {
			t.Fatalf("ExecStream yielded error %v", err)
		}
		got = append(got, ev)
	}
	if len(got) != 5 {
		t.Fatalf("ExecStream yielded %d events; want 5: %+v", len(got), got)
	}
	if got[0].Type != ExecEventStart || got[0].Pid != 42 || got[0].Command != "cmd" || got[0].SessionID != "default" {
		t.Errorf("start event = %+v", got[0])
	}
	if got[1].Type != ExecEventStdout || string(got[1].Data) != "héllo " || got[1].Timestamp.IsZero() {
		t.Errorf("stdout event = %+v", got[1])
	}
	if got[2].Type != ExecEventStderr || string(got[2].Data) != "warn\n" {
		t.Errorf("stderr event = %+v", got[2])
	}
	if !bytes.Equal(got[3].Data, bin) {
		t.Errorf("base64 chunk = %q; want %q", got[3].Data, bin)
	}
	if got[4].Type != ExecEventComplete || got[4].ExitCode != 7 || got[4].Duration != 12*time.Millisecond || got[4].Reason != "oom-killed" {
		t.Errorf("complete event = %+v", got[4])
	}

	var stdout, stderr bytes.Buffer
	code, err := c.SandboxHandle("box").ExecStreamTo(t.Context(), "cmd", nil, &stdout, &stderr)
	if err != nil || code != 7 {
		t.Errorf("ExecStreamTo = %d, %v; want 7, nil", code, err)
	}
	if want := "héllo " + string(bin); stdout.String() != want || stderr.String() != "warn\n" {
		t.Errorf("ExecStreamTo stdout %q stderr %q", stdout.String(), stderr.String())
	}
	ev, err := c.SandboxHandle("box").ExecStreamComplete(t.Context(), "cmd", nil, nil, nil)
	if err != nil || ev.ExitCode != 7 || ev.Reason != "oom-killed" {
		t.Errorf("ExecStreamComplete = %+v, %v; want exit 7, reason oom-killed", ev, err)
	}
}

func TestExecStreamErrorEvent(t *testing.T) {
	events := []map[string]any{
		start(),
		{"type": "stdout", "data": "partial"},
		{"type": "error", "code": "COMMAND_TIMEOUT", "error": "command timed out after 100ms"},
	}
	c := newTestClient(t, streamHandler(t, events, nil))
	var last ExecEvent
	var lastErr error
	n := 0
	for ev, err := range c.SandboxHandle("box").ExecStream(t.Context(), "cmd", &ExecOptions{Timeout: 100 * time.Millisecond}) {
		n++
		last, lastErr = ev, err
		if err == nil && ev.Type == ExecEventError {
			t.Errorf("error event yielded with a nil error")
		}
	}
	if n != 3 {
		t.Errorf("yielded %d items; want 3", n)
	}
	if last.Type != ExecEventError || last.Code != errdefs.CodeCommandTimeout {
		t.Errorf("last event = %+v; want an error event with COMMAND_TIMEOUT", last)
	}
	if !errors.Is(lastErr, errdefs.ErrDeadlineExceeded) || !errdefs.IsCode(lastErr, errdefs.CodeCommandTimeout) {
		t.Errorf("last error = %v; want COMMAND_TIMEOUT", lastErr)
	}
	code, err := c.SandboxHandle("box").ExecStreamTo(t.Context(), "cmd", nil, nil, nil)
	if code != -1 || !errdefs.IsCode(err, errdefs.CodeCommandTimeout) {
		t.Errorf("ExecStreamTo = %d, %v; want -1, COMMAND_TIMEOUT", code, err)
	}
}

// TestExecStreamIncomplete is acceptance E6: a stream that ends without complete or error is
// an error, never a clean exit 0.
func TestExecStreamIncomplete(t *testing.T) {
	tests := []struct {
		name   string
		events []map[string]any
		end    func(w http.ResponseWriter, r *http.Request)
	}{
		{name: "EOF after output", events: []map[string]any{start(), {"type": "stdout", "data": "x"}}},
		{name: "EOF with no events"},
		{name: "connection cut inside a frame", events: []map[string]any{start()},
			end: func(w http.ResponseWriter, r *http.Request) {
				conn, buf, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Errorf("hijack: %v", err)
					return
				}
				// Finish the current chunk, then die mid-frame without a terminating chunk.
				_ = buf.Flush()
				fmt.Fprintf(conn, "10\r\ndata: {\"type\":\"std\r\n")
				conn.Close()
			}},
		{name: "complete without exitCode", events: []map[string]any{start(), {"type": "complete"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, streamHandler(t, tt.events, tt.end))
			var lastErr error
			completed := false
			for ev, err := range c.SandboxHandle("box").ExecStream(t.Context(), "cmd", nil) {
				if err != nil {
					lastErr = err
				}
				if ev.Type == ExecEventComplete {
					completed = true
				}
			}
			if lastErr == nil || completed {
				t.Fatalf("ExecStream ended with err %v, completed %v; want an error and no completion", lastErr, completed)
			}
			if !strings.Contains(lastErr.Error(), `sandbox "box"`) {
				t.Errorf("error %q lacks context", lastErr)
			}
			code, err := c.SandboxHandle("box").ExecStreamTo(t.Context(), "cmd", nil, nil, nil)
			if err == nil || code == 0 {
				t.Errorf("ExecStreamTo = %d, %v; want an error", code, err)
			}
		})
	}
	// The cut stream is STREAM_INCOMPLETE, class ErrUnavailable.
	c := newTestClient(t, streamHandler(t, []map[string]any{start()}, nil))
	_, err := c.SandboxHandle("box").ExecStreamTo(t.Context(), "cmd", nil, nil, nil)
	if !errdefs.IsCode(err, errdefs.CodeStreamIncomplete) || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("cut stream error = %v; want STREAM_INCOMPLETE (ErrUnavailable)", err)
	}
}

func TestExecStreamCancelAndBreak(t *testing.T) {
	serverDone := make(chan struct{}, 4)
	mux := streamHandler(t, []map[string]any{start(), {"type": "stdout", "data": "tick"}},
		func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // the client went away
			serverDone <- struct{}{}
		})
	c := newTestClient(t, mux)

	// Cancelling ctx mid-stream yields an error that is both STREAM_INCOMPLETE and the ctx's.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var lastErr error
	for ev, err := range c.SandboxHandle("box").ExecStream(ctx, "cmd", nil) {
		if ev.Type == ExecEventStdout {
			cancel()
		}
		if err != nil {
			lastErr = err
		}
	}
	if !errors.Is(lastErr, context.Canceled) || !errdefs.IsCode(lastErr, errdefs.CodeStreamIncomplete) {
		t.Errorf("cancelled stream error = %v; want STREAM_INCOMPLETE wrapping context.Canceled", lastErr)
	}
	waitDone(t, serverDone)

	// Breaking out of the loop closes the stream.
	for ev, err := range c.SandboxHandle("box").ExecStream(t.Context(), "cmd", nil) {
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
		if ev.Type == ExecEventStdout {
			break
		}
	}
	waitDone(t, serverDone)
}

func waitDone(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never saw the client go away")
	}
}

func TestExecStreamHTTPError(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/box/execute/stream", func(w http.ResponseWriter, r *http.Request) {
		writeEnvelope(w, errdefs.New(errdefs.CodeSandboxNotFound, "no such sandbox"))
	})
	c := newTestClient(t, mux)
	n := 0
	for _, err := range c.SandboxHandle("box").ExecStream(t.Context(), "cmd", nil) {
		n++
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("error = %v; want SANDBOX_NOT_FOUND", err)
		}
	}
	if n != 1 {
		t.Errorf("yielded %d items; want 1", n)
	}
}
