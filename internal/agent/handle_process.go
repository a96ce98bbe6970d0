package agent

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/process"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// Kill grace periods, for DELETE /api/process/{id} and /api/process/kill-all.
const (
	defaultKillGrace = 5 * time.Second
	maxKillGrace     = 60 * time.Second
)

// handleProcessStart: POST /api/process/start → {success, processId, pid, command, process,
// timestamp}.
func (s *Server) handleProcessStart(w http.ResponseWriter, r *http.Request, _ string) error {
	var body agentapi.ProcessStartRequest
	if err := decode(w, r, &body); err != nil {
		return err
	}
	if strings.IndexByte(body.Command, 0) >= 0 {
		return errdefs.New(errdefs.CodeInvalidCommand, "command contains a NUL byte")
	}
	if err := validateEnv(body.Env); err != nil {
		return err
	}
	if strings.IndexByte(body.Cwd, 0) >= 0 {
		return errdefs.New(errdefs.CodeInvalidPath, "cwd contains a NUL byte").With("path", body.Cwd)
	}
	if body.LogBufferBytes < 0 {
		return errdefs.Newf(errdefs.CodeInvalidArgument, "logBufferBytes %d is negative", body.LogBufferBytes)
	}
	info, err := s.procs.Start(process.StartRequest{
		Command: body.Command, ID: body.ProcessID, SessionID: body.SessionID, Env: body.Env, Cwd: body.Cwd,
		LogBytes: body.LogBufferBytes,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.ProcessStartReply{Success: true, ProcessID: info.ID, PID: info.PID, Command: info.Command,
		Process: info, Timestamp: now()})
	return nil
}

// handleProcessList: GET /api/process/list[?status=S] → {success, processes, timestamp}.
func (s *Server) handleProcessList(w http.ResponseWriter, r *http.Request, _ string) error {
	status := process.Status(r.URL.Query().Get("status"))
	switch status {
	case "", process.StatusStarting, process.StatusRunning, process.StatusCompleted, process.StatusFailed,
		process.StatusKilled, process.StatusError:
	default:
		return errdefs.Newf(errdefs.CodeInvalidArgument, "unknown status %q", status).With("status", string(status))
	}
	writeJSON(w, http.StatusOK, agentapi.ProcessListReply{Success: true, Processes: s.procs.List(status), Timestamp: now()})
	return nil
}

// handleProcessGet: GET /api/process/{id} → {success, process, timestamp}.
func (s *Server) handleProcessGet(w http.ResponseWriter, _ *http.Request, id string) error {
	info, err := s.procs.Get(id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.ProcessReply{Success: true, Process: info, Timestamp: now()})
	return nil
}

// killGrace reads ?graceMs= (0–60000, default 5000).
func killGrace(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("graceMs")
	if v == "" {
		return defaultKillGrace, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 || ms > maxKillGrace.Milliseconds() {
		return 0, errdefs.Newf(errdefs.CodeInvalidArgument, "graceMs %q: want 0-%d", v, maxKillGrace.Milliseconds()).
			With("graceMs", v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// handleProcessKill: DELETE /api/process/{id}[?graceMs=N] → {success, processId, killed,
// process, timestamp}, once the process has ended.
func (s *Server) handleProcessKill(w http.ResponseWriter, r *http.Request, id string) error {
	grace, err := killGrace(r)
	if err != nil {
		return err
	}
	killed, info, err := s.procs.Kill(id, grace)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.ProcessKillReply{Success: true, ProcessID: id, Killed: killed, Process: info, Timestamp: now()})
	return nil
}

// handleProcessKillAll: DELETE /api/process/kill-all[?graceMs=N] → {success, cleanedCount,
// timestamp}.
func (s *Server) handleProcessKillAll(w http.ResponseWriter, r *http.Request, _ string) error {
	grace, err := killGrace(r)
	if err != nil {
		return err
	}
	n := s.procs.KillAll(grace)
	writeJSON(w, http.StatusOK, agentapi.ProcessKillAllReply{Success: true, CleanedCount: n, Timestamp: now()})
	return nil
}

// heldText prepares one stream's held bytes for the logs reply: after a drop it starts at the
// next whole character (offset moves past up to 3 continuation bytes).
func heldText(b []byte, offset int64) ([]byte, int64) {
	if offset == 0 {
		return b, offset
	}
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b, offset = b[1:], offset+1
	}
	return b, offset
}

// droppedMarker is the line the logs reply puts before a stream's text when its front was
// dropped.
func droppedMarker(n int64, stream string, bufBytes int) string {
	return fmt.Sprintf("[hutch: %d earlier bytes of %s were dropped (log buffer %d bytes)]\n", n, stream, bufBytes)
}

// handleProcessLogs: GET /api/process/{id}/logs → {success, processId, stdout, stderr,
// encoding?, stdoutOffset, stdoutEnd, stdoutDropped, stderrOffset, stderrEnd, stderrDropped,
// status, exitCode?, timestamp}.
func (s *Server) handleProcessLogs(w http.ResponseWriter, _ *http.Request, id string) error {
	l, err := s.procs.Logs(id)
	if err != nil {
		return err
	}
	out, outOff := heldText(l.Stdout, l.StdoutOffset)
	errb, errOff := heldText(l.Stderr, l.StderrOffset)
	var stdout, stderr, encoding string
	if utf8.Valid(out) && utf8.Valid(errb) {
		stdout, stderr = string(out), string(errb)
		if outOff > 0 {
			stdout = droppedMarker(outOff, "stdout", l.LogBytes) + stdout
		}
		if errOff > 0 {
			stderr = droppedMarker(errOff, "stderr", l.LogBytes) + stderr
		}
	} else {
		// Undecodable text: the exact held bytes, base64.
		out, outOff, errb, errOff = l.Stdout, l.StdoutOffset, l.Stderr, l.StderrOffset
		stdout, stderr = base64.StdEncoding.EncodeToString(out), base64.StdEncoding.EncodeToString(errb)
		encoding = "base64"
	}
	writeJSON(w, http.StatusOK, agentapi.ProcessLogsReply{Success: true, ProcessID: id, Stdout: stdout, Stderr: stderr,
		Encoding: encoding, StdoutOffset: outOff, StdoutEnd: l.StdoutEnd, StdoutDropped: outOff, StderrOffset: errOff,
		StderrEnd: l.StderrEnd, StderrDropped: errOff, Status: l.Info.Status, ExitCode: l.Info.ExitCode, Timestamp: now()})
	return nil
}

// streamOffsets reads the resume offsets: ?stdoutOffset=N&stderrOffset=M, else the
// Last-Event-ID header "N,M"; 0 when absent.
func streamOffsets(r *http.Request) (so, se int64, err error) {
	q := r.URL.Query()
	parse := func(name, v string) (int64, error) {
		if v == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, errdefs.Newf(errdefs.CodeInvalidArgument, "%s %q: want a byte offset ≥ 0", name, v).With(name, v)
		}
		return n, nil
	}
	if q.Has("stdoutOffset") || q.Has("stderrOffset") {
		if so, err = parse("stdoutOffset", q.Get("stdoutOffset")); err != nil {
			return 0, 0, err
		}
		se, err = parse("stderrOffset", q.Get("stderrOffset"))
		return so, se, err
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		a, b, ok := strings.Cut(id, ",")
		if !ok {
			return 0, 0, errdefs.Newf(errdefs.CodeInvalidArgument, "Last-Event-ID %q: want stdoutOffset,stderrOffset", id)
		}
		if so, err = parse("stdoutOffset", a); err != nil {
			return 0, 0, err
		}
		se, err = parse("stderrOffset", b)
		return so, se, err
	}
	return 0, 0, nil
}

// exitMessage is the data of the exit frame.
func exitMessage(info process.Info) string {
	if info.ExitCode == nil {
		return fmt.Sprintf("Process ended with status %s: %s", info.Status, info.Error)
	}
	return fmt.Sprintf("Process %s with exit code %d", info.Status, *info.ExitCode)
}

// handleProcessStream: GET /api/process/{id}/stream[?stdoutOffset=N&stderrOffset=M] → SSE
// process_info, dropped…, stdout/stderr… (each with an "id: <stdoutNext>,<stderrNext>" line),
// then exit. A chunk's offset is that of its first byte in its stream; the id gives the
// offsets to resume from.
func (s *Server) handleProcessStream(w http.ResponseWriter, r *http.Request, id string) error {
	so, se, err := streamOffsets(r)
	if err != nil {
		return err
	}
	f, err := s.procs.Follow(id, so, se)
	if err != nil {
		return err
	}
	info, err := s.procs.Get(id)
	if err != nil {
		return err
	}
	out := sse.NewWriter(w)
	if err := out.Send(agentapi.ProcessInfoEvent{Type: "process_info", ProcessID: id, Command: info.Command, Status: info.Status,
		PID: info.PID, Timestamp: now()}); err != nil {
		return nil
	}
	// delivered is what the client has of each stream: the chunkers may hold back the start
	// of a character until its end arrives.
	delivered := [2]int64{so, se}
	var chunkers [2]utf8Chunker
	eventID := func() string { return strconv.FormatInt(delivered[0], 10) + "," + strconv.FormatInt(delivered[1], 10) }
	send := func(st process.Stream, c chunk, offset int64, n int) error {
		delivered[st] = offset + int64(n)
		ev := agentapi.ProcessOutputEvent{Type: st.String(), ProcessID: id, Data: c.data, Offset: offset, Timestamp: now()}
		if c.base64 {
			ev.Encoding = "base64"
		}
		return out.SendID(eventID(), ev)
	}
	flush := func(st process.Stream) error {
		pending := len(chunkers[st].pending)
		if c, ok := chunkers[st].flush(); ok {
			return send(st, c, delivered[st], pending)
		}
		return nil
	}
	for {
		ev, err := f.Next(r.Context())
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if r.Context().Err() == nil {
				_ = out.Send(agentapi.ErrorEvent{Type: "error", Code: string(errdefs.CodeOf(err)), Error: err.Error(), Timestamp: now()})
			}
			return nil
		}
		switch ev.Kind {
		case process.KindOutput:
			held := len(chunkers[ev.Stream].pending)
			c, ok := chunkers[ev.Stream].push(ev.Data)
			if !ok {
				continue
			}
			n := held + len(ev.Data) - len(chunkers[ev.Stream].pending)
			err = send(ev.Stream, c, ev.Offset-int64(held), n)
		case process.KindDropped:
			if err = flush(ev.Stream); err == nil {
				delivered[ev.Stream] = ev.To
				err = out.SendID(eventID(), agentapi.ProcessDroppedEvent{Type: "dropped", Stream: ev.Stream.String(), From: ev.From,
					To: ev.To, Timestamp: now()})
			}
		case process.KindExit:
			if err = flush(process.Stdout); err == nil {
				err = flush(process.Stderr)
			}
			if err == nil {
				err = out.Send(agentapi.ProcessExitEvent{Type: "exit", ProcessID: id, ExitCode: ev.Info.ExitCode, Status: ev.Info.Status,
					Data: exitMessage(ev.Info), Timestamp: now()})
			}
		}
		if err != nil {
			return nil // the client is gone
		}
	}
}

// handleProcessWaitLog: POST /api/process/{id}/wait-log {pattern?, text?, stream?, timeoutMs?}
// → {success, line, match, groups?, stream, timestamp}.
func (s *Server) handleProcessWaitLog(w http.ResponseWriter, r *http.Request, id string) error {
	var body agentapi.WaitLogRequest
	if err := decode(w, r, &body); err != nil {
		return err
	}
	m, err := s.procs.WaitLog(r.Context(), id, process.LogWait{
		Pattern: body.Pattern, Text: body.Text, Stream: body.Stream, Timeout: time.Duration(body.TimeoutMs) * time.Millisecond,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.WaitLogReply{Success: true, Line: m.Line, Match: m.Match, Groups: m.Groups,
		Stream: m.Stream.String(), Timestamp: now()})
	return nil
}

// handleProcessWaitPort: POST /api/process/{id}/wait-port {port, mode?, path?, status?: {min,
// max}, intervalMs?, timeoutMs?} → {success, port, statusCode?, timestamp}.
func (s *Server) handleProcessWaitPort(w http.ResponseWriter, r *http.Request, id string) error {
	var body agentapi.WaitPortRequest
	if err := decode(w, r, &body); err != nil {
		return err
	}
	res, err := s.procs.WaitPort(r.Context(), id, process.PortWait{
		Port: body.Port, Mode: body.Mode, Path: body.Path, StatusMin: body.Status.Min, StatusMax: body.Status.Max,
		Interval: time.Duration(body.IntervalMs) * time.Millisecond, Timeout: time.Duration(body.TimeoutMs) * time.Millisecond,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.WaitPortReply{Success: true, Port: res.Port, StatusCode: res.StatusCode, Timestamp: now()})
	return nil
}

// handleProcessWaitExit: POST /api/process/{id}/wait-exit {timeoutMs?} → {success, processId,
// exitCode, status, timestamp}.
func (s *Server) handleProcessWaitExit(w http.ResponseWriter, r *http.Request, id string) error {
	var body agentapi.WaitExitRequest
	if err := decode(w, r, &body); err != nil {
		return err
	}
	info, err := s.procs.WaitExit(r.Context(), id, time.Duration(body.TimeoutMs)*time.Millisecond)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.WaitExitReply{Success: true, ProcessID: id, ExitCode: info.ExitCode, Status: info.Status,
		Timestamp: now()})
	return nil
}
