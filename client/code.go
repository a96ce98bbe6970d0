package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"time"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
)

// Code interpreter languages.
const (
	LanguagePython     = v1.LanguagePython
	LanguageJavaScript = v1.LanguageJavaScript
	LanguageTypeScript = v1.LanguageTypeScript
)

// Code run event types (CodeEvent.Type).
const (
	CodeEventStdout   = v1.CodeEventStdout
	CodeEventStderr   = v1.CodeEventStderr
	CodeEventResult   = v1.CodeEventResult
	CodeEventError    = v1.CodeEventError
	CodeEventComplete = v1.CodeEventComplete
)

// CodeContextOptions configures CreateCodeContext.
type CodeContextOptions = v1.CreateCodeContextRequest

// CodeContext is a persistent interpreter in a sandbox: variables, imports and definitions
// survive between runs.
type CodeContext = v1.CodeContext

// CodeResult is one rich output of a run (a displayed value, a display() call, a figure), with
// one field per format it has.
type CodeResult = v1.CodeResult

// CodeError is the exception a run ended with. Name is TimeoutError when RunCodeOptions.Timeout
// expired (the run was interrupted; a Python context keeps its state), KeyboardInterrupt after
// InterruptCode in Python, KernelError when the interpreter died (it is restarted and the
// context's state is lost; Value says so).
type CodeError = v1.CodeError

// CodeExecution is the buffered outcome of RunCode.
type CodeExecution = v1.CodeExecution

// RunCodeOptions configures RunCode and RunCodeStream.
type RunCodeOptions struct {
	// Context is the ID of the context to run in. Empty runs the code in a fresh context of
	// Language (with Cwd and EnvVars) that is deleted after the run.
	Context  string
	Language string
	Cwd      string
	EnvVars  map[string]string
	// Timeout interrupts the run after this long (0: none); it then ends with a CodeError
	// named TimeoutError.
	Timeout time.Duration
}

// CodeEvent is one event of a streamed run. Which fields are set depends on Type:
//   - "stdout", "stderr": Text, a chunk as the code printed it;
//   - "result": Result;
//   - "error": Error (the run's end);
//   - "execution_complete": ExecutionCount (the run's end).
type CodeEvent struct {
	Type           string
	Text           string
	Result         *CodeResult
	Error          *CodeError
	ExecutionCount int
}

// CreateCodeContext starts an interpreter (POST /v1/sandboxes/{id}/contexts). Errors:
// INVALID_LANGUAGE, INVALID_PATH (cwd), VALIDATION_FAILED (env), CONTEXT_LIMIT_EXCEEDED,
// INTERPRETER_NOT_AVAILABLE (the language's interpreter is missing from the image),
// INTERPRETER_START_TIMEOUT (it did not start in time; retry).
func (s *Sandbox) CreateCodeContext(ctx context.Context, opts CodeContextOptions) (CodeContext, error) {
	var c CodeContext
	if err := s.do(ctx, http.MethodPost, "/contexts", opts, &c); err != nil {
		return CodeContext{}, fmt.Errorf("create code context in sandbox %q: %w", s.sandboxID, err)
	}
	return c, nil
}

// ListCodeContexts returns the sandbox's code contexts, oldest first
// (GET /v1/sandboxes/{id}/contexts).
func (s *Sandbox) ListCodeContexts(ctx context.Context) ([]CodeContext, error) {
	var reply v1.CodeContextList
	if err := s.do(ctx, http.MethodGet, "/contexts", nil, &reply); err != nil {
		return nil, fmt.Errorf("list code contexts of sandbox %q: %w", s.sandboxID, err)
	}
	return reply.Contexts, nil
}

// DeleteCodeContext kills context id's interpreter and its process tree
// (DELETE /v1/sandboxes/{id}/contexts/{cid}). Errors: CONTEXT_NOT_FOUND.
func (s *Sandbox) DeleteCodeContext(ctx context.Context, id string) error {
	if err := s.do(ctx, http.MethodDelete, "/contexts/"+url.PathEscape(id), nil, nil); err != nil {
		return fmt.Errorf("delete code context %q: %w", id, err)
	}
	return nil
}

// InterruptCode interrupts the run in progress on context id, if any; that run ends with a
// CodeError (Python: KeyboardInterrupt, the context keeps its state)
// (POST /v1/sandboxes/{id}/contexts/{cid}/interrupt). Errors: CONTEXT_NOT_FOUND.
func (s *Sandbox) InterruptCode(ctx context.Context, id string) error {
	if err := s.do(ctx, http.MethodPost, "/contexts/"+url.PathEscape(id)+"/interrupt", struct{}{}, nil); err != nil {
		return fmt.Errorf("interrupt code context %q: %w", id, err)
	}
	return nil
}

// runRequest returns the path and body of a run.
func (o *RunCodeOptions) runRequest(code string) (string, v1.RunCodeRequest) {
	if o == nil {
		o = &RunCodeOptions{}
	}
	body := v1.RunCodeRequest{Code: code}
	if o.Timeout > 0 {
		body.TimeoutMs = millis(o.Timeout)
	}
	if o.Context != "" {
		return "/contexts/" + url.PathEscape(o.Context) + "/run", body
	}
	body.Language, body.Cwd, body.EnvVars = o.Language, o.Cwd, o.EnvVars
	return "/run-code", body
}

// RunCode runs code and returns its outcome once it ended (the ?buffered=1 form). An exception
// in the code is not an error: it is CodeExecution.Error. Errors: CONTEXT_NOT_FOUND,
// INVALID_LANGUAGE and CreateCodeContext's (without a context).
func (s *Sandbox) RunCode(ctx context.Context, code string, opts *RunCodeOptions) (*CodeExecution, error) {
	rest, body := opts.runRequest(code)
	if err := checkID(s.sandboxID); err != nil {
		return nil, fmt.Errorf("run code: %w", err)
	}
	var out CodeExecution
	err := s.c.call(ctx, request{method: http.MethodPost, path: sandboxPath(s.sandboxID, rest), query: url.Values{"buffered": {"1"}}, json: body}, &out)
	if err != nil {
		return nil, fmt.Errorf("run code in sandbox %q: %w", s.sandboxID, err)
	}
	return &out, nil
}

// codeEventWire is a code run's event as sent. Error is the message of a destroy's event as
// hutchd sent it before that event took the CodeEvent shape (value).
type codeEventWire struct {
	v1.CodeEvent
	Error string `json:"error"`
}

// RunCodeStream runs code and streams its events as they happen (SSE). Each range over the
// iterator runs the code once. The sequence is stdout/stderr/result events, then exactly one
// of: an "execution_complete" event, an "error" event (the code's exception; err is nil), or a
// zero CodeEvent with a non-nil error when the call fails (CONTEXT_NOT_FOUND, …) or the
// stream is cut before its end (STREAM_INCOMPLETE). Breaking out of the loop early interrupts
// the run.
func (s *Sandbox) RunCodeStream(ctx context.Context, code string, opts *RunCodeOptions) iter.Seq2[CodeEvent, error] {
	rest, body := opts.runRequest(code)
	return func(yield func(CodeEvent, error) bool) {
		fail := func(err error) { yield(CodeEvent{}, fmt.Errorf("run code in sandbox %q: %w", s.sandboxID, err)) }
		if err := checkID(s.sandboxID); err != nil {
			fail(err)
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		resp, err := s.c.send(ctx, request{method: http.MethodPost, path: sandboxPath(s.sandboxID, rest), json: body, accept: "text/event-stream"})
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
			var w codeEventWire
			if err := json.Unmarshal(frame, &w); err != nil {
				fail(errdefs.Wrap(errdefs.CodeInternal, err, "decode code event"))
				return
			}
			ev := CodeEvent{Type: w.Type}
			switch w.Type {
			case CodeEventStdout, CodeEventStderr:
				ev.Text = w.Text
			case CodeEventResult:
				res := w.CodeResult
				ev.Result, ev.ExecutionCount = &res, res.ExecutionCount
			case CodeEventError:
				if w.Code != "" {
					msg := w.Value
					if msg == "" {
						msg = w.Error
					}
					if msg == "" && w.Name != "" {
						msg = "code run failed: " + w.Name
					}
					fail(errdefs.New(w.Code, msg))
					return
				}
				ev.Error = &CodeError{Name: w.Name, Value: w.Value, Traceback: w.Traceback}
				yield(ev, nil)
				return
			case CodeEventComplete:
				ev.ExecutionCount = w.ExecutionCount
				yield(ev, nil)
				return
			default:
				continue
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}
