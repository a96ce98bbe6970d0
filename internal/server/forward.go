package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agentapi"
	"github.com/hutchdev/hutch/internal/agentclient"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/sandboxid"
)

// forward returns the handler that relays one route to the sandbox's agent. JSON bodies are read
// whole (bounded, checked to be JSON) before the sandbox is touched, so bad input changes
// nothing; raw bodies and all replies are streamed, and SSE replies are flushed per read. If the
// caller goes away the agent request is cancelled, which kills the command it runs. The sandbox
// is held awake (Manager.Hold) until the reply is done. hutchd's own errors name the public
// route's operation; the agent's replies pass through unchanged.
func (s *Server) forward(rt agentapi.Route) http.HandlerFunc {
	op := rt.Public.Operation
	return func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = http.NoBody
		length := int64(0)
		var upload *bodyErr
		if rt.Method != http.MethodGet && rt.Method != http.MethodDelete {
			if rt.Body == v1.BodyRaw {
				// Bounded by auth (bodyLimit): a chunked body cut at the bound fails the
				// agent request, answered 413 below; the agent keeps no partial file.
				upload = &bodyErr{r: r.Body}
				body, length = upload, r.ContentLength
			} else {
				b, err := readBody(w, r)
				if err != nil {
					writeError(w, r, err, op)
					return
				}
				if len(bytes.TrimSpace(b)) == 0 {
					b = []byte("{}")
				}
				if !json.Valid(b) {
					writeError(w, r, errdefs.New(errdefs.CodeInvalidJSON, "request body is not valid JSON"), op)
					return
				}
				body, length = bytes.NewReader(b), int64(len(b))
			}
		}
		// After the body (a bad body is answered first), before Hold and Ensure: a bad ID is
		// the caller's error, not a sandbox that is gone.
		sid, err := pathID(r)
		if err != nil {
			writeError(w, r, err, op)
			return
		}
		id := sid.String()
		// The request holds the sandbox awake for its whole duration, streamed reply included
		// (taken before Ensure: a sleep that has not begun cannot begin now).
		release := s.mgr.Hold(sid)
		defer release()
		resp, sent, err := s.roundTrip(r, rt, sid, body, length)
		if err != nil {
			var mbe *http.MaxBytesError
			if upload != nil && errors.As(upload.err, &mbe) {
				writeError(w, r, tooLarge(mbe.Limit), op)
				return
			}
			if !errdefs.IsCode(err, errdefs.CodeSandboxNotFound) && s.mgr.Gone(r.Context(), sid) {
				writeError(w, r, destroyed(id, err), op)
				return
			}
			// An agent that cannot be reached, or failed, while a stop or sleep took its sandbox
			// down: that is the stop's doing. A coded error (a start that failed) stays. An
			// uncoded failure to start a sandbox that was down already is answered the same
			// way, saying so: the request was never sent.
			if c := errdefs.CodeOf(err); c == errdefs.CodeAgentUnavailable || c == errdefs.CodeInternal {
				if st, down := s.mgr.Down(r.Context(), sid); down {
					if sent {
						writeError(w, r, wentDown(id, st, err), op)
					} else {
						writeError(w, r, notStarted(id, st, err), op)
					}
					return
				}
			}
			var ee *errdefs.Error
			if errors.As(err, &ee) {
				writeError(w, r, err, op)
				return
			}
			if r.Context().Err() != nil {
				return // the caller left; nothing to answer
			}
			writeError(w, r, errdefs.Wrap(errdefs.CodeAgentUnavailable, err, "sandbox agent unreachable").With("id", id), op)
			return
		}
		defer resp.Body.Close()
		stream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
		if resp.StatusCode >= 500 && !stream && s.mgr.Gone(r.Context(), sid) {
			// The agent answered while the destroy shut it down (its requests' context
			// cancelled): that is the destroy's answer, not an internal error.
			writeError(w, r, destroyed(id, nil), op)
			return
		}
		if resp.StatusCode >= 500 && !stream {
			if st, down := s.mgr.Down(r.Context(), sid); down {
				// The agent answered while a stop or sleep shut it down. Only a reply that says
				// no more than that (INTERNAL_ERROR, its cancelled request, a reply cut short)
				// becomes the stop's answer; a coded failure (NO_SPACE, GIT_CLONE_FAILED) stays
				// the caller's.
				head, down := stopsReply(resp.Body)
				if down {
					writeError(w, r, wentDown(id, st, nil), op)
					return
				}
				resp.Body = struct {
					io.Reader
					io.Closer
				}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
			}
		}
		for _, h := range []string{"Content-Type", "Content-Length", "Cache-Control", agentapi.HeaderBinary, "Content-Disposition"} {
			if v := resp.Header.Get(h); v != "" {
				w.Header().Set(h, v)
			}
		}
		w.WriteHeader(resp.StatusCode)
		if stream {
			err = copyEvents(w, resp.Body, func() bool { return s.mgr.Gone(r.Context(), sid) }, func() []byte { return destroyedEvent(rt, id) })
		} else {
			err = copyResponse(w, resp.Body, false)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			s.log.DebugContext(r.Context(), "forward: copy ended", "path", r.URL.Path, "err", err)
			// The agent's side broke mid-reply: abort ours too, so the caller sees a cut
			// stream instead of a clean end that passes for a whole reply.
			panic(http.ErrAbortHandler)
		}
	}
}

// roundTrip sends one request to the sandbox's agent, starting the sandbox first if needed,
// and reports whether it sent the request (false: the sandbox could not be made running for
// it, and the error is Ensure's). If the agent cannot even be dialled (the container died: its
// agent crashed or sandbox code killed it), the sandbox is rechecked and, when it is gone,
// started again and the request sent once more; nothing was delivered the first time, so this
// cannot run a command twice. A raw body cannot be sent again, so it gets no second attempt.
func (s *Server) roundTrip(r *http.Request, rt agentapi.Route, id sandboxid.ID, body io.Reader, length int64) (*http.Response, bool, error) {
	for attempt := 0; ; attempt++ {
		agent, err := s.mgr.Ensure(r.Context(), id)
		if err != nil {
			return nil, attempt > 0, err
		}
		if attempt > 0 {
			if br, ok := body.(*bytes.Reader); ok {
				_, _ = br.Seek(0, io.SeekStart) // a bytes.Reader seeks to 0 without fail
			}
		}
		resp, err := agent.Forward(r, rt, body, length)
		if err == nil || attempt > 0 || rt.Body == v1.BodyRaw || !agentclient.IsDialError(err) {
			return resp, true, err
		}
		if !s.mgr.Recheck(r.Context(), id) {
			return nil, true, err
		}
		s.log.WarnContext(r.Context(), "sandbox agent was gone; restarted the sandbox", "sandbox_id", id)
	}
}

// maxEnvelope is the most of an agent's 5xx reply the forwarder reads to tell its code: an
// error envelope is far smaller.
const maxEnvelope = 64 << 10

// stopsReply reads the start (at most maxEnvelope+1 bytes) of body, a 5xx reply the agent gave
// while a stop or sleep took its sandbox down, and reports whether that reply is the stop's
// doing: its read failed (the connection was cut), or it names no code other than
// INTERNAL_ERROR (not an envelope; the agent's cancelled request). A reply longer than
// maxEnvelope is judged by the code its start names (the agent writes code first). It returns
// the bytes read, which a reply passed on must begin with.
func stopsReply(body io.Reader) ([]byte, bool) {
	head, err := io.ReadAll(io.LimitReader(body, maxEnvelope+1))
	if err != nil {
		return head, true
	}
	var code errdefs.Code
	if len(head) > maxEnvelope {
		code = leadingCode(head)
	} else {
		var env struct {
			Code errdefs.Code `json:"code"`
		}
		if json.Unmarshal(head, &env) == nil {
			code = env.Code
		}
	}
	return head, code == "" || code == errdefs.CodeInternal
}

// leadingCode is the "code" member of the JSON object that prefix begins, "" when the prefix
// ends (or stops being JSON) before it.
func leadingCode(prefix []byte) errdefs.Code {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return ""
		}
		if key == "code" {
			v, _ := dec.Token()
			c, _ := v.(string)
			return errdefs.Code(c)
		}
		// Skip the member's value, token by token (Decode would need all of it).
		for depth := 0; ; {
			t, err := dec.Token()
			if err != nil {
				return ""
			}
			switch t {
			case json.Delim('{'), json.Delim('['):
				depth++
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
			if depth == 0 {
				break
			}
		}
	}
	return ""
}

// wentDown is the error of an operation that met a stop or sleep of its sandbox: UNAVAILABLE
// (503); the next request starts or wakes the sandbox, and whether to send this one again is
// the caller's call (a command it cut short ran in part). cause (nil: the agent's own error
// reply) is kept for errors.Is.
func wentDown(id string, st sandbox.Status, cause error) error {
	msg := fmt.Sprintf("sandbox %q went down (%s) while the request ran; the next request starts it again", id, st)
	return cutShort(errdefs.CodeUnavailable, cause, msg).With("id", id).With("status", string(st))
}

// notStarted is the error of an operation whose sandbox was stopped, stopping or sleeping (st)
// and could not be started for it, for a reason without a code of its own (its record could
// not be written): UNAVAILABLE (503), as wentDown; nothing ran, and the next request tries
// the start again. cause is kept for errors.Is.
func notStarted(id string, st sandbox.Status, cause error) error {
	msg := fmt.Sprintf("sandbox %q is %s and could not be started for the request; the next request tries again", id, st)
	return cutShort(errdefs.CodeUnavailable, cause, msg).With("id", id).With("status", string(st))
}

// cutShort is the error of code and msg of an operation cut short, wrapping cause unless it
// is nil (the agent's own error reply).
func cutShort(code errdefs.Code, cause error, msg string) *errdefs.Error {
	if cause == nil {
		return errdefs.New(code, msg)
	}
	return errdefs.Wrap(code, cause, msg)
}

// destroyed is the error of an operation that met a destroy of its sandbox: SANDBOX_NOT_FOUND,
// like any operation after it. cause (nil: the agent's own error reply) is kept for errors.Is.
func destroyed(id string, cause error) error {
	return cutShort(errdefs.CodeSandboxNotFound, cause, fmt.Sprintf("sandbox %q was destroyed", id)).With("id", id)
}

// maxHeldEvent bounds the bytes of one SSE event copyEvents holds before passing it on as is
// (the agent's events are output chunks of at most a few tens of KiB).
const maxHeldEvent = 1 << 20

// copyEvents copies an SSE reply event by event, flushing whenever nothing more is buffered.
// When gone says the sandbox is being destroyed, an "error" event of the agent (its context
// cancelled by the shutdown) is replaced by the SANDBOX_NOT_FOUND event destroyedEv returns, and
// a stream cut short gets one in place of its unfinished event, then ends cleanly: a destroy's
// answer is the same whether it met the stream before, during or after the agent's end.
func copyEvents(w http.ResponseWriter, src io.Reader, gone func() bool, destroyedEv func() []byte) error {
	rc := http.NewResponseController(w)
	br := bufio.NewReaderSize(src, 64<<10)
	var ev bytes.Buffer
	passing := false  // the held event outgrew maxHeldEvent: it goes through as is
	replaced := false // a SANDBOX_NOT_FOUND event went out
	write := func(b []byte) error {
		if _, err := w.Write(b); err != nil {
			return err
		}
		if br.Buffered() == 0 {
			return rc.Flush()
		}
		return nil
	}
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if passing {
				if werr := write(line); werr != nil {
					return werr
				}
			} else {
				ev.Write(line)
			}
			end := err == nil && (len(line) == 1 || (len(line) == 2 && line[0] == '\r'))
			switch {
			case end && passing:
				passing = false
			case end:
				out := ev.Bytes()
				if bytes.Contains(out, []byte(`"type":"error"`)) && gone() {
					out, replaced = destroyedEv(), true
				}
				if werr := write(out); werr != nil {
					return werr
				}
				ev.Reset()
			case !passing && ev.Len() > maxHeldEvent:
				if werr := write(ev.Bytes()); werr != nil {
					return werr
				}
				ev.Reset()
				passing = true
			}
		}
		if err == nil || errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if gone() {
			// An unfinished event is dropped: half an event would not parse.
			if !passing && !replaced {
				if werr := write(destroyedEv()); werr != nil {
					return werr
				}
			}
			return nil
		}
		if ev.Len() > 0 {
			if werr := write(ev.Bytes()); werr != nil {
				return werr
			}
		}
		return err
	}
}

// destroyedEvent is the SSE "error" event, SANDBOX_NOT_FOUND, of a stream of route rt that met
// a destroy of sandbox id, shaped as that stream's error events are: a code run's as a
// v1.CodeEvent (name "SandboxDestroyed", the message as value, an empty traceback: the shape
// the agent gives a run that could not run), watch's with the message under "message"
// (v1.WatchEvent), the exec, process and file streams' under "error" (v1.StreamError).
func destroyedEvent(rt agentapi.Route, id string) []byte {
	msg := fmt.Sprintf("sandbox %q was destroyed", id)
	ev := map[string]any{"type": "error", "code": errdefs.CodeSandboxNotFound}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	switch rt.ID {
	case "runCode", "runCodeOnce": // code events carry no timestamp
		ev["name"], ev["value"], ev["traceback"] = "SandboxDestroyed", msg, []string{}
	case "watch":
		ev["message"], ev["timestamp"] = msg, now
	default:
		ev["error"], ev["timestamp"] = msg, now
	}
	b, _ := json.Marshal(ev) // a map of strings marshals without fail
	return append(append([]byte("data: "), b...), '\n', '\n')
}

// bodyErr is a request body that keeps the error its reads ended with, other than io.EOF: the
// transport does not always return it.
type bodyErr struct {
	r   io.Reader
	err error
}

func (b *bodyErr) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// copyBufs recycles the 32 KiB buffers replies are copied through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyResponse copies the agent's reply; streams are flushed after every read so events reach
// the caller as they happen.
func copyResponse(w http.ResponseWriter, src io.Reader, stream bool) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	if !stream {
		_, err := io.CopyBuffer(w, src, buf)
		return err
	}
	rc := http.NewResponseController(w)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if ferr := rc.Flush(); ferr != nil {
				return ferr
			}
		}
		if err != nil {
			return err
		}
	}
}
