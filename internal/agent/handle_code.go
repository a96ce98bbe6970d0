package agent

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/interp"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// maxCodeTimeout bounds a run's timeout_ms (24 h).
const maxCodeTimeout = 24 * time.Hour

// createContext validates body and creates the context.
func (s *Server) createContext(ctx context.Context, body agentapi.ContextCreateRequest) (interp.Context, error) {
	if body.Language == "" {
		body.Language = "python"
	}
	if err := validateEnv(body.EnvVars); err != nil {
		return interp.Context{}, err
	}
	if strings.IndexByte(body.Cwd, 0) >= 0 {
		return interp.Context{}, errdefs.New(errdefs.CodeInvalidPath, "cwd contains a NUL byte").With("path", body.Cwd)
	}
	cwd := body.Cwd
	switch {
	case cwd == "":
		cwd = s.workdir
	case !filepath.IsAbs(cwd):
		cwd = filepath.Join(s.workdir, cwd)
	}
	return s.code.Create(ctx, body.Language, filepath.Clean(cwd), body.EnvVars)
}

// handleContextCreate: POST /api/contexts {language, cwd?, envVars?} → 201 {id, language, cwd,
// createdAt}. Errors: INVALID_LANGUAGE, INVALID_PATH, VALIDATION_FAILED, CONTEXT_LIMIT_EXCEEDED,
// INTERPRETER_NOT_AVAILABLE, INTERPRETER_START_TIMEOUT.
func (s *Server) handleContextCreate(w http.ResponseWriter, r *http.Request, _ string) error {
	var body agentapi.ContextCreateRequest
	if err := decode(w, r, &body); err != nil {
		return err
	}
	c, err := s.createContext(r.Context(), body)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, c)
	return nil
}

// handleContextList: GET /api/contexts → {contexts: [...]}, oldest first.
func (s *Server) handleContextList(w http.ResponseWriter, _ *http.Request, _ string) error {
	writeJSON(w, http.StatusOK, agentapi.ContextListReply{Contexts: s.code.List()})
	return nil
}

// handleContextGet: GET /api/contexts/{cid} → the context. Errors: CONTEXT_NOT_FOUND.
func (s *Server) handleContextGet(w http.ResponseWriter, _ *http.Request, id string) error {
	c, err := s.code.Get(id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

// handleContextDelete: DELETE /api/contexts/{cid} → {success, id}; the interpreter's process
// tree is killed. Errors: CONTEXT_NOT_FOUND.
func (s *Server) handleContextDelete(w http.ResponseWriter, _ *http.Request, id string) error {
	if err := s.code.Delete(id); errdefs.IsCode(err, errdefs.CodeContextNotFound) {
		return err
	} else if err != nil {
		// Removed, but its interpreter did not exit in time: not the caller's problem.
		s.log.Warn("code context: interpreter did not exit", "context_id", id, "err", err)
	}
	writeJSON(w, http.StatusOK, agentapi.ContextReply{Success: true, ID: id})
	return nil
}

// handleContextInterrupt: POST /api/contexts/{cid}/interrupt → {success, id}: the run in
// progress, if any, ends with an error (Python: KeyboardInterrupt). Errors: CONTEXT_NOT_FOUND.
func (s *Server) handleContextInterrupt(w http.ResponseWriter, _ *http.Request, id string) error {
	if err := s.code.Interrupt(id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.ContextReply{Success: true, ID: id})
	return nil
}

// runTimeout is a run's timeout: timeout_ms, else its alias timeoutMs.
func runTimeout(b agentapi.RunRequest) (time.Duration, error) {
	ms := b.TimeoutMs
	if ms == 0 {
		ms = b.Timeout
	}
	if ms < 0 || time.Duration(ms)*time.Millisecond > maxCodeTimeout {
		return 0, errdefs.Newf(errdefs.CodeInvalidArgument, "timeout_ms %d is out of range (0–%d)", ms, maxCodeTimeout.Milliseconds()).With("field", "timeout_ms")
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// handleContextRun: POST /api/contexts/{cid}/run {code, timeout_ms?} → SSE frames stdout
// {text}, stderr {text}, result {text, html, png, jpeg, svg, json, markdown, latex,
// javascript, executionCount}, then execution_complete {executionCount} or error {name,
// value, traceback}. With ?buffered=1: {results, logs: {stdout, stderr}, error,
// executionCount}. Errors before the stream: CONTEXT_NOT_FOUND, VALIDATION_FAILED.
func (s *Server) handleContextRun(w http.ResponseWriter, r *http.Request, id string) error {
	var body agentapi.RunRequest
	if err := decode(w, r, &body); err != nil {
		return err
	}
	timeout, err := runTimeout(body)
	if err != nil {
		return err
	}
	if _, err := s.code.Get(id); err != nil {
		return err
	}
	return s.runCode(w, r, id, body.Code, timeout)
}

// handleRunCode: POST /api/run-code {code, language?, cwd?, envVars?, timeout_ms?} runs code in
// a fresh context of language (default python) that is deleted afterwards; the reply is as
// handleContextRun's. Errors: INVALID_LANGUAGE and the other errors of context creation.
func (s *Server) handleRunCode(w http.ResponseWriter, r *http.Request) error {
	var body agentapi.RunRequest
	if err := decode(w, r, &body); err != nil {
		return err
	}
	timeout, err := runTimeout(body)
	if err != nil {
		return err
	}
	c, err := s.createContext(r.Context(), agentapi.ContextCreateRequest{Language: body.Language, Cwd: body.Cwd, EnvVars: body.EnvVars})
	if err != nil {
		return err
	}
	defer func() { _ = s.code.Delete(c.ID) }()
	return s.runCode(w, r, c.ID, body.Code, timeout)
}

// mimeFields maps MIME types to the reference's result fields.
var mimeFields = map[string]string{
	"text/plain":             "text",
	"text/html":              "html",
	"image/png":              "png",
	"image/jpeg":             "jpeg",
	"image/svg+xml":          "svg",
	"application/json":       "json",
	"text/markdown":          "markdown",
	"text/latex":             "latex",
	"application/javascript": "javascript",
}

// resultFields turns a MIME bundle into the reference's result fields (other types dropped).
func resultFields(data map[string]any) map[string]any {
	out := make(map[string]any, len(data))
	for mt, v := range data {
		if f, ok := mimeFields[mt]; ok {
			out[f] = v
		}
	}
	return out
}

// runCode runs code on context id and replies as SSE, or as one JSON object with ?buffered=1.
func (s *Server) runCode(w http.ResponseWriter, r *http.Request, id, code string, timeout time.Duration) error {
	if q := r.URL.Query().Get("buffered"); q == "1" || q == "true" {
		return s.runCodeBuffered(w, r, id, code, timeout)
	}
	sw := sse.NewWriter(w)
	err := s.code.Run(r.Context(), id, code, timeout, func(ev interp.Event) {
		var v any
		switch ev.Type {
		case interp.EventStdout, interp.EventStderr:
			v = agentapi.CodeOutputEvent{Type: ev.Type, Text: ev.Text}
		case interp.EventResult:
			m := resultFields(ev.Data)
			m["type"] = interp.EventResult
			m["executionCount"] = ev.ExecutionCount
			v = m
		case interp.EventError:
			v = agentapi.CodeErrorEvent{Type: ev.Type, CodeError: agentapi.CodeError{Name: ev.Name, Value: ev.Value, Traceback: nonNil(ev.Traceback)}}
		case interp.EventComplete:
			v = agentapi.CodeCompleteEvent{Type: ev.Type, ExecutionCount: ev.ExecutionCount}
		default:
			return
		}
		_ = sw.Send(v)
	})
	if err != nil {
		// The context went away between the check and the run.
		_ = sw.Send(agentapi.CodeFailedEvent{Type: interp.EventError,
			CodeError: agentapi.CodeError{Name: "ContextNotFound", Value: err.Error(), Traceback: []string{}}, Code: string(errdefs.CodeOf(err))})
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// maxBufferedLog bounds each stream's output held by the buffered form of a run, in bytes.
const maxBufferedLog = 16 << 20

// runCodeBuffered is runCode's ?buffered=1 form: {results, logs: {stdout, stderr}, error,
// executionCount}.
func (s *Server) runCodeBuffered(w http.ResponseWriter, r *http.Request, id, code string, timeout time.Duration) error {
	out := agentapi.CodeBufferedReply{Results: []map[string]any{}, Logs: agentapi.CodeLogs{Stdout: []string{}, Stderr: []string{}}}
	// The buffered form holds the run's output in memory: past maxBufferedLog bytes per stream
	// the rest is dropped, with one marker (the streaming form has no limit).
	var held [2]int
	keep := func(dst *[]string, n *int, text string) {
		switch {
		case *n+len(text) <= maxBufferedLog:
			*dst = append(*dst, text)
		case *n <= maxBufferedLog:
			*dst = append(*dst, fmt.Sprintf("\n[hutch: output truncated at %d MiB; use the streaming form for all of it]\n", maxBufferedLog>>20))
		}
		*n += len(text)
	}
	err := s.code.Run(r.Context(), id, code, timeout, func(ev interp.Event) {
		switch ev.Type {
		case interp.EventStdout:
			keep(&out.Logs.Stdout, &held[0], ev.Text)
		case interp.EventStderr:
			keep(&out.Logs.Stderr, &held[1], ev.Text)
		case interp.EventResult:
			out.Results = append(out.Results, resultFields(ev.Data))
			out.ExecutionCount = ev.ExecutionCount
		case interp.EventError:
			out.Error = &agentapi.CodeError{Name: ev.Name, Value: ev.Value, Traceback: nonNil(ev.Traceback)}
		case interp.EventComplete:
			out.ExecutionCount = ev.ExecutionCount
		}
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
