package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/sse"
)

// Code interpreter languages.
const (
	LanguagePython     = "python"
	LanguageJavaScript = "javascript"
	LanguageTypeScript = "typescript"
)

// Code run event types (CodeEvent.Type).
const (
	CodeEventStdout   = "stdout"
	CodeEventStderr   = "stderr"
	CodeEventResult   = "result"
	CodeEventError    = "error"
	CodeEventComplete = "execution_complete"
)

// CodeContextOptions configures CreateCodeContext.
type CodeContextOptions struct {
	// Language is "python" (default), "javascript" or "typescript".
	Language string `json:"language,omitempty"`
	// Cwd is the interpreter's working directory: absolute, or relative to the sandbox's
	// workdir (the default). It must exist.
	Cwd string `json:"cwd,omitempty"`
	// EnvVars are added to the sandbox environment of the interpreter.
	EnvVars map[string]string `json:"envVars,omitempty"`
}

// CodeContext is a persistent interpreter in a sandbox: variables, imports and definitions
// survive between runs.
type CodeContext struct {
	ID        string    `json:"id"`
	Language  string    `json:"language"`
	Cwd       string    `json:"cwd"` // absolute
	CreatedAt time.Time `json:"createdAt"`
}

// CodeResult is one rich output of a run (a displayed value, a display() call, a figure), with
// one field per format it has.
type CodeResult struct {
	Text       string `json:"text,omitempty"`       // text/plain
	HTML       string `json:"html,omitempty"`       // text/html (e.g. a pandas DataFrame)
	PNG        []byte `json:"png,omitempty"`        // image/png (e.g. a matplotlib figure)
	JPEG       []byte `json:"jpeg,omitempty"`       // image/jpeg
	SVG        string `json:"svg,omitempty"`        // image/svg+xml
	Markdown   string `json:"markdown,omitempty"`   // text/markdown
	LaTeX      string `json:"latex,omitempty"`      // text/latex
	JavaScript string `json:"javascript,omitempty"` // application/javascript
	// JSON is application/json, decoded (dicts and lists in Python, objects in JavaScript).
	JSON any `json:"json,omitempty"`
	// ExecutionCount is the run's execution count (streamed results only).
	ExecutionCount int `json:"executionCount,omitempty"`
}

// CodeError is the exception a run ended with. Name is TimeoutError when RunCodeOptions.Timeout
// expired (the run was interrupted; a Python context keeps its state), KeyboardInterrupt after
// InterruptCode in Python, KernelError when the interpreter died (it is restarted and the
// context's state is lost; Value says so).
type CodeError struct {
	Name      string   `json:"name"`
	Value     string   `json:"value"`
	Traceback []string `json:"traceback"` // lines, without ANSI escapes
}

// CodeExecution is the buffered outcome of RunCode.
type CodeExecution struct {
	Results []CodeResult `json:"results"`
	Logs    struct {
		Stdout []string `json:"stdout"` // chunks in the order printed
		Stderr []string `json:"stderr"`
	} `json:"logs"`
	Error          *CodeError `json:"error"` // nil when the run completed
	ExecutionCount int        `json:"executionCount"`
}

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
	var reply struct {
		Contexts []CodeContext `json:"contexts"`
	}
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
func (o *RunCodeOptions) runRequest(code string) (string, map[string]any) {
	if o == nil {
		o = &RunCodeOptions{}
	}
	body := map[string]any{"code": code}
	if o.Timeout > 0 {
		body["timeout_ms"] = millis(o.Timeout)
	}
	if o.Context != "" {
		return "/contexts/" + url.PathEscape(o.Context) + "/run", body
	}
	if o.Language != "" {
		body["language"] = o.Language
	}
	if o.Cwd != "" {
		body["cwd"] = o.Cwd
	}
	if len(o.EnvVars) > 0 {
		body["envVars"] = o.EnvVars
	}
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

type codeEventWire struct {
	CodeResult
	Type      string       `json:"type"`
	Name      string       `json:"name"`
	Value     string       `json:"value"`
	Traceback []string     `json:"traceback"`
	Code      errdefs.Code `json:"code"`
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
					fail(errdefs.New(w.Code, w.Value))
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
