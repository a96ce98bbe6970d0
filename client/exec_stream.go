package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"time"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
)

// Exec stream event types (ExecEvent.Type).
const (
	ExecEventStart    = "start"
	ExecEventStdout   = "stdout"
	ExecEventStderr   = "stderr"
	ExecEventComplete = "complete"
	ExecEventError    = "error"
)

// ExecEvent is one event of a command's stream. Which fields are set depends on Type:
//   - "start": Pid, Command, SessionID.
//   - "stdout", "stderr": Data, the exact bytes of one chunk of output (at most 64 KiB), in the
//     order the program wrote them.
//   - "complete": ExitCode (shell convention, 128+N for signal N), Duration and Reason (as
//     ExecResult.Reason).
//   - "error": Code and Message (Code COMMAND_TIMEOUT when ExecOptions.Timeout expired).
//
// Timestamp is set on every event.
type ExecEvent struct {
	Type      string
	Data      []byte
	Pid       int
	Command   string
	SessionID string
	ExitCode  int
	Duration  time.Duration
	Reason    string
	Code      errdefs.Code
	Message   string
	Timestamp time.Time
}

type execEventWire = v1.ExecEvent

// ExecStream runs command like Exec but streams its events (POST
// /v1/sandboxes/{id}/execute/stream). Each range over the returned iterator runs the command
// once. The sequence is: one "start" event, "stdout"/"stderr" events, then exactly one
// terminal outcome:
//   - a "complete" event with a nil error, after which the iteration ends; a non-zero exit
//     code is not an error;
//   - an "error" event together with a non-nil *errdefs.Error of the event's code (e.g.
//     COMMAND_TIMEOUT, errors.Is(err, errdefs.ErrDeadlineExceeded));
//   - a zero ExecEvent with a non-nil error, when the call fails or the stream ends for any
//     other reason. A stream cut before its terminal event (EOF, broken connection, cancelled
//     ctx) yields an error of code STREAM_INCOMPLETE (class ErrUnavailable; a cancelled ctx is
//     also matched by errors.Is(err, context.Canceled)) — never a clean exit.
//
// Breaking out of the loop early closes the stream, which makes hutchd kill the command's
// process tree. Event types unknown to this version are skipped.
func (s *scope) ExecStream(ctx context.Context, command string, opts *ExecOptions) iter.Seq2[ExecEvent, error] {
	body := s.execRequest(command, opts)
	return func(yield func(ExecEvent, error) bool) {
		fail := func(err error) { yield(ExecEvent{}, fmt.Errorf("exec stream in %s: %w", s.where(), err)) }
		if err := checkID(s.sandboxID); err != nil {
			fail(err)
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		resp, err := s.c.send(ctx, request{
			method: http.MethodPost,
			path:   sandboxPath(s.sandboxID, "/execute/stream"),
			json:   body,
			accept: "text/event-stream",
		})
		if err != nil {
			fail(err)
			return
		}
		defer resp.Body.Close()
		r := sse.NewReader(resp.Body)
		for {
			frame, err := r.Next()
			if err != nil {
				fail(streamIncomplete(ctx, err))
				return
			}
			var w execEventWire
			if err := json.Unmarshal(frame, &w); err != nil {
				fail(errdefs.Wrap(errdefs.CodeInternal, err, "decode exec event"))
				return
			}
			ev := ExecEvent{Type: w.Type, Timestamp: w.Timestamp}
			switch w.Type {
			case ExecEventStart:
				ev.Pid, ev.Command, ev.SessionID = w.PID, w.Command, w.SessionID
			case ExecEventStdout, ExecEventStderr:
				if ev.Data, err = decodeData(w.Data, w.Encoding); err != nil {
					fail(errdefs.Wrap(errdefs.CodeInternal, err, "decode "+w.Type+" chunk"))
					return
				}
			case ExecEventComplete:
				if w.ExitCode == nil {
					fail(errdefs.New(errdefs.CodeInternal, "complete event without an exit code"))
					return
				}
				ev.ExitCode = *w.ExitCode
				ev.Duration = time.Duration(w.Duration) * time.Millisecond
				ev.Reason = w.Reason
				yield(ev, nil)
				return
			case ExecEventError:
				e := errdefs.Envelope{Code: w.Code, Message: w.Error, Context: w.Context}.Err()
				ev.Code, ev.Message = e.Code, e.Message
				yield(ev, fmt.Errorf("exec stream in %s: %w", s.where(), e))
				return
			default:
				s.c.log.DebugContext(ctx, "hutch: skipping unknown exec event", "type", w.Type)
				continue
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// ExecStreamTo runs command with ExecStream, copying its stdout and stderr chunks to stdout and
// stderr (nil writers discard) as they arrive, and returns the command's exit code. err is
// non-nil, and exitCode -1, when the command did not complete: an "error" event (e.g.
// COMMAND_TIMEOUT), a stream cut before its end (STREAM_INCOMPLETE), a failed call, or a
// failed write to stdout or stderr (which also stops the command).
func (s *scope) ExecStreamTo(ctx context.Context, command string, opts *ExecOptions, stdout, stderr io.Writer) (exitCode int, err error) {
	ev, err := s.ExecStreamComplete(ctx, command, opts, stdout, stderr)
	if err != nil {
		return -1, err
	}
	return ev.ExitCode, nil
}

// ExecStreamComplete is ExecStreamTo returning the whole "complete" event: ExitCode, Duration
// and Reason ("oom-killed" when the command died of SIGKILL while the sandbox was out of
// memory, as ExecResult.Reason).
func (s *scope) ExecStreamComplete(ctx context.Context, command string, opts *ExecOptions, stdout, stderr io.Writer) (ExecEvent, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	for ev, err := range s.ExecStream(ctx, command, opts) {
		if err != nil {
			return ExecEvent{}, err
		}
		switch ev.Type {
		case ExecEventStdout:
			if _, err := stdout.Write(ev.Data); err != nil {
				return ExecEvent{}, fmt.Errorf("exec in %s: write stdout: %w", s.where(), err)
			}
		case ExecEventStderr:
			if _, err := stderr.Write(ev.Data); err != nil {
				return ExecEvent{}, fmt.Errorf("exec in %s: write stderr: %w", s.where(), err)
			}
		case ExecEventComplete:
			return ev, nil
		}
	}
	return ExecEvent{}, fmt.Errorf("exec in %s: %w", s.where(), streamIncomplete(ctx, nil))
}

// decodeData returns the bytes of an event's data field.
func decodeData(data, encoding string) ([]byte, error) {
	if encoding == "base64" {
		return base64.StdEncoding.DecodeString(data)
	}
	return []byte(data), nil
}
