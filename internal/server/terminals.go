package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// TerminalSubprotocol is the WebSocket subprotocol of terminals. A browser, which cannot set an
// Authorization header on a WebSocket, also offers "bearer.<token>" (see wsToken).
const TerminalSubprotocol = "hutch.v1"

// terminalFrameLimit is the largest WebSocket message relayed, in bytes, either way.
const terminalFrameLimit = 1 << 20

var terminalIDPattern = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

func checkTerminalID(tid string) error {
	if !terminalIDPattern.MatchString(tid) {
		return errdefs.Newf(errdefs.CodeInvalidArgument, "invalid terminal id %q: want 1-64 characters of [a-z0-9_-]", tid).With("terminalId", tid)
	}
	return nil
}

// listTerminals is GET /v1/sandboxes/{id}/terminals → {"terminals":[…]} (the agent's reply).
func (s *Server) listTerminals(w http.ResponseWriter, r *http.Request) {
	s.forward(agentapi.Public("listTerminals"))(w, r)
}

// killTerminal is DELETE /v1/sandboxes/{id}/terminals/{tid}: SIGHUP to the shell's tree, SIGKILL
// after a grace; replies {"terminal":{…}} once it ended. Unknown → 404 TERMINAL_NOT_FOUND.
func (s *Server) killTerminal(w http.ResponseWriter, r *http.Request) {
	tid := r.PathValue("tid")
	if err := checkTerminalID(tid); err != nil {
		writeError(w, r, err, "terminal.kill")
		return
	}
	s.forward(agentapi.Public("killTerminal"))(w, r)
}

// connectTerminal is GET /v1/sandboxes/{id}/terminals/{tid} with a WebSocket upgrade: it wakes
// the sandbox, dials the agent's terminal WebSocket over the sandbox's agent transport, and only
// then accepts the caller's, so that errors (bad size, unknown sandbox) are plain HTTP replies
// with the error envelope. Frames are relayed both ways unchanged (binary stays binary, text
// stays text), and a close on one side is passed to the other with its status. The open
// connection holds the sandbox awake and its frames count as activity.
func (s *Server) connectTerminal(w http.ResponseWriter, r *http.Request) {
	const op = "terminal.connect"
	tid := r.PathValue("tid")
	if err := checkTerminalID(tid); err != nil {
		writeError(w, r, err, op)
		return
	}
	id, err := pathID(r)
	if err != nil {
		writeError(w, r, err, op)
		return
	}
	if !isWebSocketUpgrade(r) {
		writeError(w, r, errdefs.New(errdefs.CodeInvalidArgument, "GET /v1/sandboxes/{id}/terminals/{tid} needs a WebSocket upgrade (subprotocol "+TerminalSubprotocol+"); list terminals with GET /v1/sandboxes/{id}/terminals"), op)
		return
	}
	q := url.Values{}
	for _, k := range agentapi.TerminalQuery {
		if v := r.URL.Query().Get(k); v != "" {
			q.Set(k, v)
		}
	}
	release := s.mgr.Hold(id)
	defer release()
	agent, err := s.mgr.Ensure(r.Context(), id)
	if err != nil {
		writeError(w, r, err, op)
		return
	}
	up, err := agent.DialTerminal(r.Context(), tid, q)
	if err != nil {
		if r.Context().Err() == nil {
			writeError(w, r, err, op)
		}
		return
	}
	defer up.CloseNow()
	// Origin was checked by auth (sameOrigin), before anything else.
	down, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{TerminalSubprotocol}, InsecureSkipVerify: true})
	if err != nil {
		return
	}
	defer down.CloseNow()
	up.SetReadLimit(terminalFrameLimit)
	down.SetReadLimit(terminalFrameLimit)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	touch := func() { s.mgr.Touch(id) }
	go func() {
		select {
		case <-s.closing: // hutchd is stopping: tell the viewer, leave the terminal running
			_ = down.Close(websocket.StatusGoingAway, "hutchd is shutting down")
			cancel()
		case <-ctx.Done():
		}
	}()
	done := make(chan struct{}, 2)
	go func() { relayFrames(ctx, down, up, touch); cancel(); done <- struct{}{} }()
	go func() { relayFrames(ctx, up, down, touch); cancel(); done <- struct{}{} }()
	<-done
	<-done
}

// relayFrames copies messages from src to dst until src ends, then closes dst with src's close
// status (1011 when src broke without one).
func relayFrames(ctx context.Context, src, dst *websocket.Conn, touch func()) {
	for {
		typ, b, err := src.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			switch {
			case errors.As(err, &ce):
				_ = dst.Close(ce.Code, ce.Reason)
			case ctx.Err() != nil:
				// The other direction ended first and has closed dst already.
			default:
				_ = dst.Close(websocket.StatusInternalError, "terminal connection lost")
			}
			return
		}
		touch()
		if err := dst.Write(ctx, typ, b); err != nil {
			return
		}
	}
}

// isWebSocketUpgrade reports whether r is a WebSocket handshake (GET with Connection: upgrade
// and Upgrade: websocket).
func isWebSocketUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
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

// sameOrigin reports whether a WebSocket handshake may proceed: no Origin (not a browser), or
// an Origin whose host[:port] is the request's Host. Anything else is a page of another site
// (cross-site WebSocket hijacking), refused with 403 ORIGIN_NOT_ALLOWED.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// wsToken returns the token a WebSocket handshake offers as the subprotocol "bearer.<token>"
// (how browsers authenticate: they cannot set headers on a WebSocket).
func wsToken(r *http.Request) (string, bool) {
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if tok, ok := strings.CutPrefix(strings.TrimSpace(p), "bearer."); ok {
				return tok, true
			}
		}
	}
	return "", false
}
