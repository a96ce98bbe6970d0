package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/errdefs"
)

// TerminalSubprotocol is the WebSocket subprotocol of terminals.
const TerminalSubprotocol = v1.TerminalSubprotocol

// TerminalOptions are the settings of a terminal that Sandbox.Terminal creates. They are
// ignored when the terminal already runs (then it keeps its own session, shell and size).
type TerminalOptions struct {
	// Session whose cwd and exported environment the shell starts with; empty means the
	// default session.
	Session string
	// Cols and Rows are the initial size, 1–1000 each; 0 means 80×24.
	Cols, Rows int
	// Shell is the absolute path of the shell in the sandbox; empty means /bin/bash.
	Shell string
}

// TerminalInfo describes a terminal of a sandbox.
type TerminalInfo = v1.TerminalInfo

// TerminalEvent is a control message from the server.
type TerminalEvent struct {
	// Type is "ready" (first, once), "exit" (the shell exited; the connection then closes) or
	// "error" (a control message was refused; the terminal stays usable).
	Type string
	// Ready: the terminal's ID, size, the PID of its shell's first process, and how many bytes
	// of earlier output (the server's ring buffer) Read returns before live output.
	ID          string
	Cols, Rows  int
	PID         int
	ReplayBytes int64
	// Exit: the shell's exit code (128+N when killed by signal N).
	ExitCode int
	// Error: the refusal (code VALIDATION_FAILED, INVALID_JSON, …).
	Err *errdefs.Error
}

// Terminal is a connected view of a sandbox terminal: a shell on a pseudo-terminal that keeps
// running when this connection closes. Read returns the raw output bytes (first the replay of
// earlier output, TerminalEvent.ReplayBytes of them, then live output; a screen should be reset
// before showing the replay), Write sends raw input bytes (keys), Resize sets the window size.
// Read, Write and Resize may be called concurrently with one another.
type Terminal struct {
	conn   *websocket.Conn
	ready  TerminalEvent
	data   chan []byte
	events chan TerminalEvent
	done   chan struct{} // closed when the connection has ended
	cancel context.CancelFunc
	closed atomic.Bool // Close was called

	mu       sync.Mutex
	pending  []byte // output received and not yet read; guarded by mu (Read is one at a time)
	exitCode *int   // guarded by mu
	err      error  // why the connection ended; guarded by mu
}

// terminalEventBuffer is how many events wait for Events before further error events are dropped.
const terminalEventBuffer = 64

// Terminal connects to terminal id of the sandbox (1–64 characters of [a-z0-9_-]), creating it
// with opts when it does not exist or its shell has exited, and returns once the server's ready
// message arrived (see Ready). ctx bounds the connection attempt only; Close ends the
// connection. The sandbox is started or woken if needed and kept awake while connected.
// Errors: VALIDATION_FAILED (id, size, session), INVALID_COMMAND (shell), SANDBOX_NOT_FOUND,
// UNAUTHENTICATED, RESOURCE_BUSY (too many terminals), UNAVAILABLE (hutchd unreachable).
func (s *Sandbox) Terminal(ctx context.Context, id string, opts TerminalOptions) (*Terminal, error) {
	if err := checkID(s.sandboxID); err != nil {
		return nil, fmt.Errorf("terminal: %w", err)
	}
	q := url.Values{}
	if opts.Session != "" {
		q.Set("session", opts.Session)
	}
	if opts.Cols != 0 || opts.Rows != 0 {
		q.Set("cols", strconv.Itoa(opts.Cols))
		q.Set("rows", strconv.Itoa(opts.Rows))
	}
	if opts.Shell != "" {
		q.Set("shell", opts.Shell)
	}
	target := s.c.base.String() + sandboxPath(s.sandboxID, "/terminals/"+url.PathEscape(id))
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	h := http.Header{"User-Agent": {s.c.userAgent}}
	if s.c.token != "" {
		h.Set("Authorization", "Bearer "+s.c.token)
	}
	conn, resp, err := websocket.Dial(ctx, target, &websocket.DialOptions{HTTPClient: s.c.hc, HTTPHeader: h, Subprotocols: []string{TerminalSubprotocol}})
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, fmt.Errorf("terminal %s: %w", id, decodeError(resp))
		}
		return nil, fmt.Errorf("terminal %s: %w", id, errdefs.Wrap(errdefs.CodeUnavailable, err, "reach hutchd"))
	}
	conn.SetReadLimit(1 << 20)
	typ, b, err := conn.Read(ctx)
	ev, perr := parseTerminalEvent(b)
	if err != nil || typ != websocket.MessageText || perr != nil || ev.Type != "ready" {
		conn.CloseNow()
		if err == nil {
			err = fmt.Errorf("first message is not ready: %q", b)
		}
		return nil, fmt.Errorf("terminal %s: %w", id, errdefs.Wrap(errdefs.CodeStreamIncomplete, err, "no ready message"))
	}
	rctx, cancel := context.WithCancel(context.Background()) //nolint:forbidigo // the read loop lives as long as the Terminal, not the dial's ctx
	t := &Terminal{conn: conn, ready: ev, data: make(chan []byte, 16), events: make(chan TerminalEvent, terminalEventBuffer),
		done: make(chan struct{}), cancel: cancel}
	t.events <- ev
	go t.readLoop(rctx)
	return t, nil
}

// parseTerminalEvent decodes a control message. "code" is a number in exit messages and a
// string in error messages.
func parseTerminalEvent(b []byte) (TerminalEvent, error) {
	var m struct {
		Type        string          `json:"type"`
		ID          string          `json:"id"`
		Cols        int             `json:"cols"`
		Rows        int             `json:"rows"`
		PID         int             `json:"pid"`
		ReplayBytes int64           `json:"replayBytes"`
		Code        json.RawMessage `json:"code"`
		Message     string          `json:"message"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return TerminalEvent{}, err
	}
	ev := TerminalEvent{Type: m.Type, ID: m.ID, Cols: m.Cols, Rows: m.Rows, PID: m.PID, ReplayBytes: m.ReplayBytes}
	switch m.Type {
	case "exit":
		if err := json.Unmarshal(m.Code, &ev.ExitCode); err != nil {
			return ev, err
		}
	case "error":
		var code string
		_ = json.Unmarshal(m.Code, &code)
		ev.Err = errdefs.New(errdefs.Code(code), m.Message)
	}
	return ev, nil
}

// readLoop sorts incoming messages into output and events until the connection ends.
func (t *Terminal) readLoop(ctx context.Context) {
	defer close(t.done)
	defer close(t.events)
	for {
		typ, b, err := t.conn.Read(ctx)
		if err != nil {
			t.mu.Lock()
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure && t.exitCode != nil {
				err = io.EOF
			} else if t.closed.Load() || ctx.Err() != nil {
				err = ErrTerminalClosed
			} else {
				err = errdefs.Wrap(errdefs.CodeStreamIncomplete, err, "terminal connection ended")
			}
			t.err = err
			t.mu.Unlock()
			return
		}
		if typ == websocket.MessageBinary {
			select {
			case t.data <- b:
			case <-ctx.Done():
			}
			continue
		}
		ev, err := parseTerminalEvent(b)
		if err != nil {
			continue
		}
		if ev.Type == "exit" {
			t.mu.Lock()
			code := ev.ExitCode
			t.exitCode = &code
			t.mu.Unlock()
		}
		select {
		case t.events <- ev:
		default: // nobody reads Events: drop
		}
	}
}

// ErrTerminalClosed is Terminal.Read's error after Close.
var ErrTerminalClosed = errors.New("hutch: terminal connection closed")

// Ready returns the server's ready message: the terminal's ID, size, PID and replay size.
func (t *Terminal) Ready() TerminalEvent { return t.ready }

// Events returns the control messages: the ready message first, then errors (refused
// control messages) and the exit. It is closed when the connection ends. Events not received
// are dropped once 64 are waiting (ExitCode keeps the exit).
func (t *Terminal) Events() <-chan TerminalEvent { return t.events }

// Read reads output bytes (io.Reader). It returns io.EOF after the shell exited (ExitCode tells
// the code) and STREAM_INCOMPLETE when the connection broke before that; the terminal itself may
// still run then (reconnect to get the replay).
func (t *Terminal) Read(p []byte) (int, error) {
	t.mu.Lock()
	if len(t.pending) > 0 {
		n := copy(p, t.pending)
		t.pending = t.pending[n:]
		t.mu.Unlock()
		return n, nil
	}
	t.mu.Unlock()
	select {
	case b := <-t.data:
		n := copy(p, b)
		t.mu.Lock()
		t.pending = b[n:]
		t.mu.Unlock()
		return n, nil
	case <-t.done:
		select {
		case b := <-t.data:
			n := copy(p, b)
			t.mu.Lock()
			t.pending = b[n:]
			t.mu.Unlock()
			return n, nil
		default:
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		return 0, t.err
	}
}

// Write sends p as input to the shell (io.Writer).
func (t *Terminal) Write(p []byte) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) //nolint:forbidigo // io.Writer and Resize take no ctx; the minute bounds a stalled socket
	defer cancel()
	if err := t.conn.Write(ctx, websocket.MessageBinary, p); err != nil {
		return 0, errdefs.Wrap(errdefs.CodeUnavailable, err, "terminal write")
	}
	return len(p), nil
}

// Resize sets the terminal's size (1–1000 columns and rows); the shell's foreground program
// gets SIGWINCH. A size out of range comes back as an "error" event (VALIDATION_FAILED) and the
// size is unchanged; Resize itself fails only when the connection does.
func (t *Terminal) Resize(cols, rows int) error {
	b, _ := json.Marshal(map[string]any{"type": "resize", "cols": cols, "rows": rows})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) //nolint:forbidigo // io.Writer and Resize take no ctx; the minute bounds a stalled socket
	defer cancel()
	if err := t.conn.Write(ctx, websocket.MessageText, b); err != nil {
		return errdefs.Wrap(errdefs.CodeUnavailable, err, "terminal resize")
	}
	return nil
}

// ExitCode returns the shell's exit code and true once the exit message has arrived.
func (t *Terminal) ExitCode() (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exitCode == nil {
		return 0, false
	}
	return *t.exitCode, true
}

// Close detaches from the terminal (the shell keeps running; kill it with KillTerminal). Read
// then returns ErrTerminalClosed (or io.EOF if the shell had exited).
func (t *Terminal) Close() error {
	t.closed.Store(true)
	_ = t.conn.Close(websocket.StatusNormalClosure, "detached")
	t.cancel()
	<-t.done
	return nil
}

// ListTerminals returns the sandbox's terminals, running and exited, sorted by ID.
func (s *Sandbox) ListTerminals(ctx context.Context) ([]TerminalInfo, error) {
	var reply v1.TerminalList
	if err := s.do(ctx, http.MethodGet, "/terminals", nil, &reply); err != nil {
		return nil, fmt.Errorf("list terminals: %w", err)
	}
	return reply.Terminals, nil
}

// KillTerminal ends terminal id: SIGHUP to its shell's session and process tree, SIGKILL to what
// is left after a grace period; attached viewers get the exit. It returns the terminal's final
// record. Unknown → TERMINAL_NOT_FOUND.
func (s *Sandbox) KillTerminal(ctx context.Context, id string) (TerminalInfo, error) {
	var reply v1.KillTerminalResult
	if err := s.do(ctx, http.MethodDelete, "/terminals/"+url.PathEscape(id), nil, &reply); err != nil {
		return TerminalInfo{}, fmt.Errorf("kill terminal %s: %w", id, err)
	}
	return reply.Terminal, nil
}
