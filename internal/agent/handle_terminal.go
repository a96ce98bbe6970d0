package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/terminal"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// Terminal WebSocket limits.
const (
	// terminalReadLimit is the largest frame a viewer may send, in bytes.
	terminalReadLimit = 1 << 20
	// terminalWriteTimeout bounds one frame write to a viewer; a viewer that does not take a
	// frame for that long is disconnected (it can reconnect and get the replay).
	terminalWriteTimeout = 30 * time.Second
)

// handleTerminalList is GET /api/terminals.
func (s *Server) handleTerminalList(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, agentapi.TerminalListReply{Success: true, Terminals: s.terms.List(), Timestamp: now()})
	return nil
}

// handleTerminalKill is DELETE /api/terminals/{tid}.
func (s *Server) handleTerminalKill(w http.ResponseWriter, r *http.Request, tid string) error {
	if err := terminal.ValidateID(tid); err != nil {
		return err
	}
	in, err := s.terms.Kill(r.Context(), tid)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.TerminalKillReply{Success: true, Terminal: in, Timestamp: now()})
	return nil
}

// isWebSocket reports whether r asks for a WebSocket upgrade.
func isWebSocket(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// terminalOptions reads the query of a connect: session, cols, rows, shell.
func terminalOptions(r *http.Request) (terminal.Options, error) {
	q := r.URL.Query()
	o := terminal.Options{Session: q.Get("session"), Shell: q.Get("shell"), Cols: terminal.DefaultCols, Rows: terminal.DefaultRows}
	for _, f := range []struct {
		name string
		dst  *int
	}{{"cols", &o.Cols}, {"rows", &o.Rows}} {
		v := q.Get(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return o, errdefs.Newf(errdefs.CodeInvalidArgument, "%s=%q: want an integer 1-%d", f.name, v, terminal.MaxSize).With(f.name, v)
		}
		*f.dst = n
	}
	return o, terminal.ValidateSize(o.Cols, o.Rows)
}

// handleTerminalConnect is GET /api/terminals/{tid} with a WebSocket upgrade: it attaches to
// the terminal (creating it) and serves the viewer until either side ends (protocol: api/agent.md
// "Terminals").
func (s *Server) handleTerminalConnect(w http.ResponseWriter, r *http.Request, tid string) error {
	if err := terminal.ValidateID(tid); err != nil {
		return err
	}
	if !isWebSocket(r) {
		return errdefs.New(errdefs.CodeInvalidArgument, "GET /api/terminals/{id} needs a WebSocket upgrade; list terminals with GET /api/terminals")
	}
	opts, err := terminalOptions(r)
	if err != nil {
		return err
	}
	v, err := s.terms.Attach(tid, opts)
	if err != nil {
		return err
	}
	defer v.Close()
	// hutchd is the agent's only client (a unix socket): there is no browser Origin to check.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{agentapi.TerminalSubprotocol}, InsecureSkipVerify: true})
	if err != nil {
		return nil // Accept has answered
	}
	defer c.CloseNow()
	c.SetReadLimit(terminalReadLimit)
	// The request's context is not usable after the hijack: the viewer's lifetime is its own.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	ready := v.Ready()
	if err := writeFrame(ctx, c, agentapi.TerminalReadyFrame{Type: "ready", ID: ready.ID, Cols: ready.Cols, Rows: ready.Rows,
		PID: ready.PID, ReplayBytes: ready.ReplayBytes}); err != nil {
		return nil
	}
	go func() {
		defer cancel()
		s.terminalOutput(ctx, c, v)
	}()
	s.terminalInput(ctx, c, v)
	return nil
}

// terminalOutput sends the viewer's output as binary frames, then the exit frame and a normal
// close once the shell has exited.
func (s *Server) terminalOutput(ctx context.Context, c *websocket.Conn, v *terminal.Viewer) {
	buf := make([]byte, 32<<10)
	for {
		n, err := v.Read(ctx, buf)
		if n > 0 {
			wctx, cancel := context.WithTimeout(ctx, terminalWriteTimeout)
			werr := c.Write(wctx, websocket.MessageBinary, buf[:n])
			cancel()
			if werr != nil {
				return
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			code, _ := v.ExitCode()
			if writeFrame(ctx, c, agentapi.TerminalExitFrame{Type: "exit", Code: code}) == nil {
				_ = c.Close(websocket.StatusNormalClosure, "shell exited")
			}
			return
		case errors.Is(err, terminal.ErrTooSlow):
			_ = c.Close(websocket.StatusTryAgainLater, "viewer too slow; reconnect for the replay")
			return
		default:
			return
		}
	}
}

// terminalInput passes binary frames to the shell as input and handles control frames until the
// viewer goes away. A bad control frame gets an error frame; the connection stays open.
func (s *Server) terminalInput(ctx context.Context, c *websocket.Conn, v *terminal.Viewer) {
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageBinary {
			if _, err := v.Write(data); err != nil {
				return
			}
			continue
		}
		if err := terminalControl(v, data); err != nil {
			env := errdefs.ToEnvelope(err, "terminal.control")
			if writeFrame(ctx, c, agentapi.TerminalErrorFrame{Type: "error", Code: env.Code, Message: env.Message}) != nil {
				return
			}
		}
	}
}

// terminalControl applies one JSON control frame: {"type":"resize","cols":C,"rows":R}.
func terminalControl(v *terminal.Viewer, data []byte) error {
	var msg agentapi.TerminalControlFrame
	if err := json.Unmarshal(data, &msg); err != nil {
		return errdefs.Wrap(errdefs.CodeInvalidJSON, err, "control frame is not a JSON object")
	}
	switch msg.Type {
	case "resize":
		var cols, rows int
		if json.Unmarshal(msg.Cols, &cols) != nil || json.Unmarshal(msg.Rows, &rows) != nil {
			return errdefs.Newf(errdefs.CodeInvalidArgument, "resize: cols and rows must be integers 1-%d", terminal.MaxSize)
		}
		return v.Resize(cols, rows)
	default:
		return errdefs.Newf(errdefs.CodeInvalidArgument, "unknown control frame type %q; want resize", msg.Type).With("type", msg.Type)
	}
}

// writeFrame sends v as a JSON text frame.
func writeFrame(ctx context.Context, c *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, terminalWriteTimeout)
	defer cancel()
	return c.Write(wctx, websocket.MessageText, b)
}
