// Package agentapi is the protocol between hutchd and hutch-init (the agent, PID 1 of every
// sandbox) as Go data: the route table, the request, reply and event types of every route (one
// file per group of routes), the header and trailer names, and the protocol Version. The agent
// registers its handlers from Routes and encodes and decodes its bodies with these types;
// hutchd's agent client (internal/agentclient) and relay (internal/server) build their requests
// from them, so neither side spells a path or a body by hand. api/agent.md is the prose
// reference.
//
// Most routes are public routes relayed by hutchd (v1.Routes, Forwarded): their entries here are
// derived from v1.Routes, and hutchd passes their bodies through unparsed, so the public API's
// api/v1 types describe the same JSON for the SDK (they are kept apart: api/v1 is a public
// contract, and some agent types differ from the SDK's in omitempty only). The rest are
// agent-only (session save, backup archive and extract), called by hutchd itself.
package agentapi

import (
	"fmt"
	"net/url"
	"strings"

	v1 "github.com/hutchdev/hutch/api/v1"
)

// Version is the agent protocol's version. The agent states it on every ping reply
// (HeaderProtocol); hutchd refuses an agent that states another (agentclient.Client.Ping,
// errdefs.CodeAgentProtocol). Change it with any change hutchd cannot talk across: a removed or
// renamed route, a field whose meaning changes. An agent that states none speaks version 1,
// the protocol as it was before the header existed.
const Version = "1"

// Header and trailer names of the protocol.
const (
	// HeaderProtocol carries the agent's protocol Version on ping replies.
	HeaderProtocol = "X-Hutch-Agent-Protocol"
	// TrailerArchiveStats carries the ArchiveStats of a complete archive as JSON. Exactly one of
	// the two archive trailers ends a backup archive reply that started: the archive is complete
	// only when this one is present.
	TrailerArchiveStats = "X-Hutch-Archive-Stats"
	// TrailerArchiveError carries the errdefs envelope (JSON) of a failure after the archive
	// reply started; the body is then a truncated archive.
	TrailerArchiveError = "X-Hutch-Archive-Error"
	// HeaderWarning carries a warning about the request (repeatable), such as a gitignore
	// archive in a directory git cannot read.
	HeaderWarning = "X-Hutch-Warning"
	// HeaderBinary says whether a raw file download is binary ("true"/"false").
	HeaderBinary = "X-Hutch-Binary"
	// HeaderLastEventID resumes a process log stream (as the offsets of its last event id).
	HeaderLastEventID = "Last-Event-ID"
	// TerminalSubprotocol is the WebSocket subprotocol of terminals.
	TerminalSubprotocol = "hutch.v1"
)

// Route is one endpoint of the agent.
type Route struct {
	// ID names the route: the public route's OperationID (v1.Route.OperationID), or for an
	// agent-only route its own name (saveSessions, archive, extract).
	ID string
	// Method is the HTTP method. The agent answers exactly it (a GET route refuses HEAD).
	Method string
	// Pattern is the agent's path in net/http.ServeMux syntax, e.g. /api/process/{pid}.
	Pattern string
	// Operation is the name the agent's error envelopes carry in their "operation" field ("" for
	// the few routes whose envelopes name none).
	Operation string
	// Body is how the request body is sent: none, a JSON document, or raw bytes streamed.
	Body v1.Body
	// Stream routes reply with a stream (SSE, a tar, a file's bytes, a WebSocket) rather than
	// one JSON document.
	Stream bool
	// Public is the public route hutchd relays to this one; nil for agent-only routes, which
	// only hutchd calls.
	Public *v1.Route
}

// MuxPattern is the route's net/http.ServeMux pattern, "METHOD /api/…".
func (r Route) MuxPattern() string { return r.Method + " " + r.Pattern }

// Wildcard is the name of the pattern's path wildcard ("pid" for /api/process/{pid}/logs), ""
// when it has none. No route has more than one.
func (r Route) Wildcard() string {
	_, rest, ok := strings.Cut(r.Pattern, "{")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "}")
	return strings.TrimSuffix(name, "...")
}

// Path is the route's path with its wildcard filled with value, escaped: an ID cannot smuggle
// a path (a slash in it reaches the agent as %2F).
func (r Route) Path(value string) string {
	start := strings.IndexByte(r.Pattern, '{')
	if start < 0 {
		return r.Pattern
	}
	end := strings.IndexByte(r.Pattern[start:], '}') + start
	return r.Pattern[:start] + url.PathEscape(value) + r.Pattern[end+1:]
}

// Agent-only routes: hutchd calls them itself, they are not part of the public API.
var (
	// SaveSessions writes every session's cwd and environment to the session file now (before
	// a memory sleep's checkpoint). Reply: SaveSessionsReply.
	SaveSessions = Route{ID: "saveSessions", Method: "POST", Pattern: "/api/session/save", Body: v1.BodyNone}
	// Archive streams an uncompressed tar of a directory. Request: ArchiveRequest; reply:
	// application/x-tar with the archive trailers.
	Archive = Route{ID: "archive", Method: "POST", Pattern: "/api/backup/archive", Operation: "backup.archive", Body: v1.BodyJSON, Stream: true}
	// Extract replaces a directory's content by a tar (query QueryDir). Reply: ExtractReply.
	Extract = Route{ID: "extract", Method: "POST", Pattern: "/api/backup/extract", Operation: "backup.extract", Body: v1.BodyRaw}
)

// QueryDir is the query parameter naming Extract's directory.
const QueryDir = "dir"

// relayed are the public routes hutchd answers with its own handler (it validates first) and
// then relays to the agent, though they are not Forwarded: the terminal routes.
var relayed = map[string]bool{"listTerminals": true, "terminal": true, "killTerminal": true}

// restIDs are the routes whose ID is the rest of the path, slashes included ({tid...}): the
// handler refuses such an ID as invalid (VALIDATION_FAILED) rather than the path as unknown.
var restIDs = map[string]bool{"terminal": true, "killTerminal": true}

// streams are the OperationIDs of the public routes whose replies stream.
var streams = map[string]bool{
	"executeStream": true, "downloadFile": true, "readFileStream": true, "streamProcessLogs": true,
	"watch": true, "runCode": true, "runCodeOnce": true, "terminal": true,
}

// operations are the agent's envelope operation names where they differ from the public
// route's v1.Route.Operation (the agent named these before the public names were set).
var operations = map[string]string{
	"ping":           "ping",
	"execute":        "exec",
	"executeStream":  "exec.stream",
	"downloadFile":   "file.raw",
	"uploadFile":     "file.raw",
	"readFileStream": "file.read.stream",
	"listTerminals":  "",
}

// Routes is every route of the agent: the public ones in the order of v1.Routes, then the
// agent-only ones.
var Routes = buildRoutes()

func buildRoutes() []Route {
	var out []Route
	for i := range v1.Routes {
		pub := &v1.Routes[i]
		if !pub.Forwarded && !relayed[pub.OperationID] {
			continue
		}
		op, ok := operations[pub.OperationID]
		if !ok {
			op = pub.Operation
		}
		pattern := agentPattern(pub.Pattern)
		if restIDs[pub.OperationID] {
			pattern = strings.Replace(pattern, "}", "...}", 1)
		}
		out = append(out, Route{ID: pub.OperationID, Method: pub.Method, Pattern: pattern, Operation: op,
			Body: pub.Body, Stream: streams[pub.OperationID], Public: pub})
	}
	return append(out, SaveSessions, Archive, Extract)
}

// sandboxPrefix is the part of a public pattern the agent's path replaces with /api/.
const sandboxPrefix = "/v1/sandboxes/{id}/"

// agentPattern is the agent's path of a public pattern below /v1/sandboxes/{id}/.
func agentPattern(public string) string {
	rest, ok := strings.CutPrefix(public, sandboxPrefix)
	if !ok {
		panic(fmt.Sprintf("agentapi: relayed route %s is not below %s", public, sandboxPrefix))
	}
	return "/api/" + rest
}

// Ping is the route of GET /api/ping.
var Ping = Public("ping")

// Public returns the agent route that public route operationID (v1.Route.OperationID) is relayed
// to. It panics when there is none: the callers name routes of v1.Routes.
func Public(operationID string) Route {
	for _, r := range Routes {
		if r.Public != nil && r.Public.OperationID == operationID {
			return r
		}
	}
	panic("agentapi: no agent route for public operation " + operationID)
}
