// Package agentclient is hutchd's typed client of a sandbox's agent: the calls of the agent
// protocol (internal/agentapi) over the per-sandbox transport the sandbox Manager dials, with
// errors classified by errdefs. hutchd builds no agent request by hand elsewhere.
//
// Errors of every call: the caller's context ending is returned wrapped (not classified: the
// caller left); a transport failure is AGENT_UNAVAILABLE (IsDialError tells one that never
// reached the agent); an error reply of the agent is its envelope's error.
package agentclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/coder/websocket"

	v1 "github.com/hutchdev/hutch/api/v1"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// base is the URL the agent's paths are sent to: the transport dials the sandbox's agent
// whatever the host, so the name only fills the Host header.
const base = "http://agent"

// maxErrorBody bounds the error reply read to decode its envelope.
const maxErrorBody = 1 << 20

// Client talks to one sandbox's agent. It is safe for concurrent use.
type Client struct {
	id string
	tr http.RoundTripper
}

// New returns the client of sandbox id's agent over tr (requests go to http://agent/api/…).
func New(id string, tr http.RoundTripper) *Client { return &Client{id: id, tr: tr} }

// send sends one request of route rt and returns the agent's reply, whatever its status.
func (c *Client) send(ctx context.Context, rt agentapi.Route, pathQuery string, body io.Reader, length int64, h http.Header) (*http.Response, error) {
	if body == nil {
		body = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, rt.Method, base+pathQuery, body)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.CodeInvalidArgument, err, "build agent request")
	}
	req.ContentLength = length
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := c.tr.RoundTrip(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("agent %s %s: %w", rt.Method, rt.Pattern, ctx.Err())
		}
		return nil, errdefs.Wrap(errdefs.CodeAgentUnavailable, err, "sandbox agent unreachable").With("id", c.id)
	}
	return resp, nil
}

// call is send for a reply that must be 2xx: another status is the envelope's error (the body
// closed).
func (c *Client) call(ctx context.Context, rt agentapi.Route, pathQuery string, body io.Reader, length int64, h http.Header) (*http.Response, error) {
	resp, err := c.send(ctx, rt, pathQuery, body, length, h)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, replyError(rt, resp)
}

// replyError is the error of an agent's non-2xx reply: its envelope's, else INTERNAL_ERROR
// quoting the reply.
func replyError(rt agentapi.Route, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err := envelopeError(b, resp.StatusCode); err != nil {
		return err
	}
	return errdefs.Newf(errdefs.CodeInternal, "agent %s: status %d: %.200s", rt.Pattern, resp.StatusCode, b)
}

// envelopeError decodes an errdefs envelope; nil if b is none.
func envelopeError(b []byte, status int) error {
	var env errdefs.Envelope
	if json.Unmarshal(b, &env) != nil || env.Code == "" {
		return nil
	}
	if env.HTTPStatus == 0 {
		env.HTTPStatus = status
	}
	return env.Err()
}

// IsDialError reports whether err is a transport failure that never reached the agent (its
// connection could not be dialled): nothing was delivered, so the request may be sent again.
func IsDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Ping asks the agent whether it answers (agentapi.Ping) and checks that it speaks
// agentapi.Version: another version is AGENT_PROTOCOL_MISMATCH (context: want, got), a reply
// other than 200 AGENT_UNAVAILABLE.
func (c *Client) Ping(ctx context.Context) (agentapi.PingReply, error) {
	resp, err := c.send(ctx, agentapi.Ping, agentapi.Ping.Pattern, nil, 0, nil)
	if err != nil {
		return agentapi.PingReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		if ctx.Err() != nil {
			return agentapi.PingReply{}, fmt.Errorf("agent ping: %w", ctx.Err())
		}
		return agentapi.PingReply{}, errdefs.Wrap(errdefs.CodeAgentUnavailable, err, "agent ping: read reply").With("id", c.id)
	}
	if resp.StatusCode != http.StatusOK {
		return agentapi.PingReply{}, errdefs.Newf(errdefs.CodeAgentUnavailable, "agent ping: status %d", resp.StatusCode).With("id", c.id)
	}
	if err := checkProtocol(resp.Header.Get(agentapi.HeaderProtocol)); err != nil {
		return agentapi.PingReply{}, err.With("id", c.id)
	}
	var rep agentapi.PingReply
	if err := json.Unmarshal(b, &rep); err != nil {
		return agentapi.PingReply{}, errdefs.Wrap(errdefs.CodeAgentUnavailable, err, "agent ping: bad reply").With("id", c.id)
	}
	return rep, nil
}

// checkProtocol refuses an agent whose ping stated version got ("" is version 1, see
// agentapi.Version).
// maxProtocolQuote is how many bytes of an agent's protocol header an error quotes.
const maxProtocolQuote = 32

func checkProtocol(got string) *errdefs.Error {
	if got == "" {
		got = "1"
	}
	if got == agentapi.Version {
		return nil
	}
	// The value comes from the sandbox's side: bounded before it enters a message that is
	// logged and kept as the sandbox's lastError.
	if len(got) > maxProtocolQuote {
		got = got[:maxProtocolQuote] + "…"
	}
	return errdefs.Newf(errdefs.CodeAgentProtocol, "the sandbox's agent speaks protocol version %q, hutchd speaks %q: restart the sandbox to run the current agent", got, agentapi.Version).
		With("want", agentapi.Version).With("got", got)
}

// SaveSessions asks the agent to write its sessions to its disk now (agentapi.SaveSessions) and
// returns how many it saved.
func (c *Client) SaveSessions(ctx context.Context) (int, error) {
	resp, err := c.call(ctx, agentapi.SaveSessions, agentapi.SaveSessions.Pattern, nil, 0, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var rep agentapi.SaveSessionsReply
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&rep); err != nil {
		return 0, errdefs.Wrap(errdefs.CodeAgentUnavailable, err, "session save: bad reply").With("id", c.id)
	}
	return rep.Saved, nil
}

// Archive is a backup archive streaming from the agent.
type Archive struct {
	// Body is the uncompressed tar; the caller closes it.
	Body io.ReadCloser
	// Warnings are the agent's warnings about the request (agentapi.HeaderWarning).
	Warnings []string
	resp     *http.Response
}

// Complete reports, once Body is read to its end, whether the archive is complete: nil only
// when the agent's stats trailer says so; the error trailer's error otherwise.
func (a *Archive) Complete() error {
	if v := a.resp.Trailer.Get(agentapi.TrailerArchiveError); v != "" {
		if err := envelopeError([]byte(v), 0); err != nil {
			return err
		}
		return errdefs.Newf(errdefs.CodeInternal, "agent: archive failed: %s", v)
	}
	if a.resp.Trailer.Get(agentapi.TrailerArchiveStats) == "" {
		return errdefs.New(errdefs.CodeInternal, "agent: archive stream ended without its completion trailer")
	}
	return nil
}

// Archive asks the agent for a tar of req.Dir (agentapi.Archive). Errors before the stream
// starts are the agent's (INVALID_PATH, INVALID_BACKUP_CONFIG, FILE_NOT_FOUND…).
func (c *Client) Archive(ctx context.Context, req agentapi.ArchiveRequest) (*Archive, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.CodeInternal, err, "encode archive request")
	}
	resp, err := c.call(ctx, agentapi.Archive, agentapi.Archive.Pattern, strings.NewReader(string(b)), int64(len(b)),
		http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return nil, err
	}
	return &Archive{Body: resp.Body, Warnings: resp.Header.Values(agentapi.HeaderWarning), resp: resp}, nil
}

// Extract makes directory dir in the sandbox hold exactly the tar read from src
// (agentapi.Extract); the reply names the directory as resolved.
func (c *Client) Extract(ctx context.Context, dir string, src io.Reader) (agentapi.ExtractReply, error) {
	q := url.Values{agentapi.QueryDir: {dir}}
	resp, err := c.call(ctx, agentapi.Extract, agentapi.Extract.Pattern+"?"+q.Encode(), src, -1,
		http.Header{"Content-Type": {"application/x-tar"}})
	if err != nil {
		return agentapi.ExtractReply{}, err
	}
	defer resp.Body.Close()
	var rep agentapi.ExtractReply
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&rep); err != nil {
		return agentapi.ExtractReply{}, errdefs.Wrap(errdefs.CodeAgentUnavailable, err, "extract: bad reply").With("id", c.id)
	}
	return rep, nil
}

// DialTerminal opens terminal tid's WebSocket on the agent (subprotocol
// agentapi.TerminalSubprotocol), creating it when it does not exist; query holds the
// agentapi.TerminalQuery parameters of a new terminal. A refused upgrade is the agent's error.
func (c *Client) DialTerminal(ctx context.Context, tid string, query url.Values) (*websocket.Conn, error) {
	rt := agentapi.Public("terminal")
	u := "ws://agent" + rt.Path(tid) + "?" + query.Encode()
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: &http.Client{Transport: c.tr},
		Subprotocols: []string{agentapi.TerminalSubprotocol}})
	if err == nil {
		return conn, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("agent terminal %s: %w", tid, ctx.Err())
	}
	if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols && resp.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		if e := envelopeError(b, resp.StatusCode); e != nil {
			return nil, e
		}
	}
	return nil, errdefs.Wrap(errdefs.CodeAgentUnavailable, err, "sandbox agent unreachable").With("id", c.id)
}

// Forward relays public request r to its agent route rt (rt.Public is r's route): the path with
// r's wildcard value, r's query, the Last-Event-ID of a resumed stream, and body (length bytes,
// -1 unknown) with r's Content-Type for a raw body, JSON otherwise. The reply is returned
// whatever its status, for the caller to pass on.
func (c *Client) Forward(r *http.Request, rt agentapi.Route, body io.Reader, length int64) (*http.Response, error) {
	p := rt.Pattern
	if w := rt.Wildcard(); w != "" {
		p = rt.Path(r.PathValue(w))
	}
	if r.URL.RawQuery != "" {
		p += "?" + r.URL.RawQuery
	}
	h := http.Header{}
	if v := r.Header.Get(agentapi.HeaderLastEventID); v != "" {
		h.Set(agentapi.HeaderLastEventID, v)
	}
	if rt.Body == v1.BodyRaw {
		if ct := r.Header.Get("Content-Type"); ct != "" {
			h.Set("Content-Type", ct)
		}
	} else {
		h.Set("Content-Type", "application/json")
	}
	return c.send(r.Context(), rt, p, body, length, h)
}
