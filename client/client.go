// Package client is the Go SDK for hutchd, the Hutch sandbox daemon.
//
// A Client talks to one hutchd over HTTP (the /v1 API described in api/openapi.yaml). Get a
// sandbox with Client.Sandbox (get-or-create), then run commands (Exec, ExecStream), move files
// (WriteFile, WriteFileFrom, ReadFile, OpenFile, …), clone repositories (GitCheckout) and manage
// sessions (CreateSession, Session) on the returned *Sandbox.
//
// Errors: every non-2xx reply is decoded from the server's JSON error envelope into an
// *errdefs.Error and returned wrapped with the operation's context, so
//
//	errors.Is(err, errdefs.ErrNotFound)              // class
//	errdefs.IsCode(err, errdefs.CodeFileNotFound)     // stable code
//
// work end to end. A failure to reach hutchd at all is an *errdefs.Error with code UNAVAILABLE;
// a cancelled context is returned as the context's error (errors.Is(err, context.Canceled)).
//
// A Client and the *Sandbox and *Session values it returns are safe for concurrent use.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// DefaultURL is the address hutchd listens on by default.
const DefaultURL = "http://127.0.0.1:7411"

// maxErrorBody is how much of an error reply is read, in bytes.
const maxErrorBody = 1 << 20

// Client is a connection to one hutchd. Build it with New.
type Client struct {
	base      *url.URL
	token     string
	hc        *http.Client
	log       *slog.Logger
	userAgent string
}

// Option configures a Client in New.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests with hc instead of a fresh http.Client.
// Do not set hc.Timeout: it would cut long exec streams and downloads; bound calls with their
// context instead.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithLogger makes the Client log each request at debug level to l. The default discards.
// The token is never logged.
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// WithUserAgent sets the User-Agent header of every request (default "hutch-go-sdk").
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a Client for the hutchd at baseURL (for example "http://127.0.0.1:7411"; an
// empty baseURL means DefaultURL) authenticating with the bearer token (from hutchd's
// <state>/token file). An empty token is allowed, but then only Health succeeds.
// New makes no network call. It fails with an INVALID_ARGUMENT-class error if baseURL is not
// an absolute http or https URL.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	if baseURL == "" {
		baseURL = DefaultURL
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.CodeInvalidArgument, err, "hutch client: base URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errdefs.Newf(errdefs.CodeInvalidArgument,
			"hutch client: base URL %q: want http://host:port or https://host:port", baseURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	c := &Client{
		base:      u,
		token:     token,
		hc:        &http.Client{CheckRedirect: noRedirects},
		log:       slog.New(slog.DiscardHandler),
		userAgent: "hutch-go-sdk",
	}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{CheckRedirect: noRedirects}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// BaseURL returns the hutchd URL the Client talks to.
func (c *Client) BaseURL() string { return c.base.String() }

// request is one HTTP call.
type request struct {
	method string
	path   string     // below the base URL, already escaped, e.g. "/v1/sandboxes/x/execute"
	query  url.Values // may be nil
	// Exactly one of json and body may be set.
	json        any
	body        io.Reader
	contentType string // for body
	accept      string
}

// send performs r and returns the response of a 2xx reply. Any other reply is decoded into an
// *errdefs.Error and its body closed. The caller closes the body of a 2xx reply.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	target := c.base.String() + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	body := r.body
	ctype := r.contentType
	if r.json != nil {
		b, err := json.Marshal(r.json)
		if err != nil {
			return nil, errdefs.Wrap(errdefs.CodeInvalidArgument, err, "encode request")
		}
		body = bytes.NewReader(b)
		ctype = "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.CodeInvalidArgument, err, "build request")
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	accept := r.accept
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", c.userAgent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		c.log.DebugContext(ctx, "hutch request failed", "method", r.method, "path", r.path, "err", err)
		return nil, errdefs.Wrap(errdefs.CodeUnavailable, err, "reach hutchd")
	}
	c.log.DebugContext(ctx, "hutch request", "method", r.method, "path", r.path,
		"status", resp.StatusCode, "elapsed", time.Since(start))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// call performs r and decodes a JSON reply into out (which may be nil).
func (c *Client) call(ctx context.Context, r request, out any) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	if err := decodeJSON(resp.Body, out); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return err
	}
	return nil
}

// decodeJSON decodes one JSON reply body into out.
func decodeJSON(r io.Reader, out any) error {
	if err := json.NewDecoder(r).Decode(out); err != nil {
		return errdefs.Wrap(errdefs.CodeInternal, err, "decode reply")
	}
	return nil
}

// decodeError turns a non-2xx reply into an *errdefs.Error: the server's envelope when the
// body is one, else INTERNAL_ERROR naming the status.
func decodeError(resp *http.Response) *errdefs.Error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var env errdefs.Envelope
	if err := json.Unmarshal(b, &env); err == nil && env.Code != "" {
		if env.HTTPStatus == 0 {
			env.HTTPStatus = resp.StatusCode
		}
		return env.Err()
	}
	text := strings.TrimSpace(string(b))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	msg := fmt.Sprintf("HTTP error: status %d", resp.StatusCode)
	if text != "" {
		msg += ": " + text
	}
	return errdefs.New(errdefs.CodeInternal, msg).With("httpStatus", resp.StatusCode)
}

// streamIncomplete is the error for an event stream that ended before its terminal event.
func streamIncomplete(ctx context.Context, cause error) *errdefs.Error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		cause = ctxErr
	}
	msg := "stream ended without a complete or error event"
	if cause != nil && !errors.Is(cause, io.EOF) {
		msg += ": " + cause.Error()
	}
	e := errdefs.New(errdefs.CodeStreamIncomplete, msg)
	e.Err = cause
	return e
}

// checkID rejects an empty sandbox ID before it becomes a malformed path.
func checkID(id string) error {
	if id == "" {
		return errdefs.New(errdefs.CodeInvalidSandboxID, "sandbox ID is empty")
	}
	return nil
}

// sandboxPath returns the escaped path of a sandbox, plus rest (which starts with "/" or is
// empty).
func sandboxPath(id, rest string) string {
	return "/v1/sandboxes/" + url.PathEscape(id) + rest
}

// millis converts d to whole milliseconds, rounding up so that a positive duration never
// becomes 0 (no limit).
func millis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// noRedirects makes the default HTTP client return a redirect as it is: hutchd's API never
// redirects, and following one (a path cleaned by a router, a hostile proxy) could send an
// authenticated call, with its method, to another resource.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
