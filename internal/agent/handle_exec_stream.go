package agent

import (
	"net/http"

	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/oom"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// streamOutput sends a command's events as SSE. The stream starts (headers and the start
// event) only when the command does, so earlier failures get a JSON envelope.
type streamOutput struct {
	w         http.ResponseWriter
	command   string
	sessionID string
	sse       *sse.Writer
	out, err  utf8Chunker
}

func (o *streamOutput) Start(pid int) error {
	o.sse = sse.NewWriter(o.w)
	return o.sse.Send(agentapi.ExecStartEvent{Type: "start", Command: o.command, PID: pid, SessionID: o.sessionID, Timestamp: now()})
}

func (o *streamOutput) Stdout(p []byte) error {
	c, ok := o.out.push(p)
	return o.send("stdout", c, ok)
}

func (o *streamOutput) Stderr(p []byte) error {
	c, ok := o.err.push(p)
	return o.send("stderr", c, ok)
}

func (o *streamOutput) send(typ string, c chunk, ok bool) error {
	if !ok {
		return nil
	}
	ev := agentapi.OutputEvent{Type: typ, Data: c.data, Timestamp: now()}
	if c.base64 {
		ev.Encoding = "base64"
	}
	return o.sse.Send(ev)
}

// flush sends what the chunkers still hold.
func (o *streamOutput) flush() error {
	c, ok := o.out.flush()
	if err := o.send("stdout", c, ok); err != nil {
		return err
	}
	c, ok = o.err.flush()
	return o.send("stderr", c, ok)
}

// handleExecuteStream: POST /api/execute/stream → SSE start, stdout/stderr…, then complete
// {exitCode, duration, reason?} or error {code, error}; reason as handleExecute's (package oom). A client disconnect kills the command's tree.
func (s *Server) handleExecuteStream(w http.ResponseWriter, r *http.Request) error {
	var body agentapi.ExecRequest
	if err := decode(w, r, &body); err != nil {
		return err
	}
	req, err := execSession(body)
	if err != nil {
		return err
	}
	sid := sessionOrDefault(body.SessionID)
	out := &streamOutput{w: w, command: body.Command, sessionID: sid}
	oomWatch := oom.Default.Start()
	res, err := s.sessions.Exec(r.Context(), sid, req, out)
	if out.sse == nil {
		return err // never started: a plain error reply
	}
	if ferr := out.flush(); ferr != nil && err == nil {
		err = ferr
	}
	if r.Context().Err() != nil {
		return nil // the client is gone; nobody to tell
	}
	if err != nil {
		_ = out.sse.Send(agentapi.ErrorEvent{Type: "error", Code: string(errdefs.CodeOf(err)), Error: err.Error(), Timestamp: now()})
		return nil
	}
	_ = out.sse.Send(agentapi.ExecCompleteEvent{Type: "complete", ExitCode: res.ExitCode, Duration: res.Duration.Milliseconds(),
		Reason: oomWatch.Reason(res.ExitCode), Timestamp: now()})
	return nil
}
