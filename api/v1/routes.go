// Package v1 is Hutch's public REST API, version 1, as Go data: the route list here, and the
// request, response and event types of each resource in the files beside it. hutchd's server
// registers its handlers from Routes, the Go SDK (client/) builds its calls from these types, and
// a test checks both against api/openapi.yaml, the hand-written specification, so none of the
// three can drift from the others.
//
// Paths use net/http.ServeMux pattern syntax ({id} is a sandbox ID). Routes answered by a
// sandbox's agent are Forwarded: hutchd authenticates, bounds and relays them to the agent at
// /api/ followed by the part of the path after /v1/sandboxes/{id}/ (api/agent.md), without
// parsing the body.
//
// Each resource's types are in a file of their own: sandboxes.go, exec.go, sessions.go,
// files.go, git.go, processes.go, ports.go, backups.go, snapshots.go, terminals.go, watch.go,
// code.go, images.go, secrets.go and egress.go; common.go has Reply (the success and timestamp
// that agent replies and most of hutchd's carry), the error envelope and the error frame of
// event streams. Bodies are …Request; replies …Result, …Reply or …List; the frames of an event
// stream are one …Event struct whose Type says which fields are set. Durations are
// milliseconds (…Ms fields) except sleepAfter, a Go duration; times are RFC 3339 in UTC;
// sizes are bytes. Errors are classified by stable codes (package errdefs); each type names
// the codes its route answers with. Where a behaviour follows the reference system, the
// Cloudflare Sandbox SDK that the API is modelled on, the type says so.
package v1

import "strings"

// Body says how a route's request body is read.
type Body int

const (
	// BodyNone: the route takes no body (GET and DELETE).
	BodyNone Body = iota
	// BodyJSON: a JSON document of at most 48 MiB, read whole and checked before anything runs.
	BodyJSON
	// BodyRaw: bytes streamed as they are (file uploads), bounded by hutchd's --max-upload.
	BodyRaw
)

// Route is one public endpoint.
type Route struct {
	// Method is the HTTP method; a GET route answers HEAD too.
	Method string
	// Pattern is the path in ServeMux syntax, e.g. /v1/sandboxes/{id}/process/{pid}.
	Pattern string
	// OperationID is the operation's operationId in api/openapi.yaml.
	OperationID string
	// Operation is the dotted name error envelopes carry in their "operation" field.
	Operation string
	// Forwarded routes are answered by the sandbox's agent (see the package doc).
	Forwarded bool
	// Body is how a Forwarded route's request body is relayed; hutchd's own routes read theirs
	// as JSON when they take one.
	Body Body
}

// sandboxPrefix is the part of a Forwarded route's pattern before its agent path.
const sandboxPrefix = "/v1/sandboxes/{id}/"

// AgentPath is the agent's path pattern of a Forwarded route: /api/ then the pattern after
// /v1/sandboxes/{id}/ (so /v1/sandboxes/{id}/process/{pid} is /api/process/{pid}). It is ""
// for hutchd's own routes.
func (r Route) AgentPath() string {
	if !r.Forwarded {
		return ""
	}
	return "/api/" + strings.TrimPrefix(r.Pattern, sandboxPrefix)
}

// Routes is every public route, in the order of api/openapi.yaml.
var Routes = []Route{
	{Method: "GET", Pattern: "/v1/health", OperationID: "health", Operation: "health"},
	{Method: "GET", Pattern: "/v1/sandboxes", OperationID: "listSandboxes", Operation: "sandbox.list"},
	{Method: "POST", Pattern: "/v1/sandboxes", OperationID: "getOrCreateSandbox", Operation: "sandbox.create"},
	{Method: "GET", Pattern: "/v1/sandboxes/{id}", OperationID: "getSandbox", Operation: "sandbox.get"},
	{Method: "PATCH", Pattern: "/v1/sandboxes/{id}", OperationID: "updateSandbox", Operation: "sandbox.update"},
	{Method: "DELETE", Pattern: "/v1/sandboxes/{id}", OperationID: "destroySandbox", Operation: "sandbox.destroy"},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/start", OperationID: "startSandbox", Operation: "sandbox.start"},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/stop", OperationID: "stopSandbox", Operation: "sandbox.stop"},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/sleep", OperationID: "sleepSandbox", Operation: "sandbox.sleep"},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/wake", OperationID: "wakeSandbox", Operation: "sandbox.wake"},
	{Method: "GET", Pattern: "/v1/sandboxes/{id}/ping", OperationID: "ping", Operation: "sandbox.ping", Forwarded: true, Body: BodyNone},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/execute", OperationID: "execute", Operation: "command.execute", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/execute/stream", OperationID: "executeStream", Operation: "command.stream", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/session/create", OperationID: "createSession", Operation: "session.create", Forwarded: true, Body: BodyJSON},
	{Method: "GET", Pattern: "/v1/sandboxes/{id}/session/list", OperationID: "listSessions", Operation: "session.list", Forwarded: true, Body: BodyNone},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/session/delete", OperationID: "deleteSession", Operation: "session.delete", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/write", OperationID: "writeFile", Operation: "file.write", Forwarded: true, Body: BodyJSON},
	{Method: "GET", Pattern: "/v1/sandboxes/{id}/files", OperationID: "downloadFile", Operation: "file.read", Forwarded: true, Body: BodyRaw},
	{Method: "PUT", Pattern: "/v1/sandboxes/{id}/files", OperationID: "uploadFile", Operation: "file.write", Forwarded: true, Body: BodyRaw},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/read", OperationID: "readFile", Operation: "file.read", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/read/stream", OperationID: "readFileStream", Operation: "file.stream", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/list-files", OperationID: "listFiles", Operation: "file.list", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/mkdir", OperationID: "mkdir", Operation: "file.mkdir", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/delete", OperationID: "deleteFile", Operation: "file.delete", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/rename", OperationID: "renameFile", Operation: "file.rename", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/move", OperationID: "moveFile", Operation: "file.move", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/exists", OperationID: "exists", Operation: "file.exists", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/git/checkout", OperationID: "gitCheckout", Operation: "git.checkout", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/process/start", OperationID: "startProcess", Operation: "process.start", Forwarded: true, Body: BodyJSON},
	{Method: "GET", Pattern: "/v1/sandboxes/{id}/process/list", OperationID: "listProcesses", Operation: "process.list", Forwarded: true, Body: BodyNone},
	{Method: "DELETE", Pattern: "/v1/sandboxes/{id}/process/kill-all", OperationID: "killAllProcesses", Operation: "process.killAll", Forwarded: true, Body: BodyNone},
	{Method: "GET", Pattern: "/v1/sandboxes/{id}/process/{pid}", OperationID: "getProcess", Operation: "process.get", Forwarded: true, Body: BodyNone},
	{Method: "DELETE", Pattern: "/v1/sandboxes/{id}/process/{pid}", OperationID: "killProcess", Operation: "process.kill", Forwarded: true, Body: BodyNone},
	{Method: "GET", Pattern: "/v1/sandboxes/{id}/process/{pid}/logs", OperationID: "getProcessLogs", Operation: "process.logs", Forwarded: true, Body: BodyNone},
	{Method: "GET", Pattern: "/v1/sandboxes/{id}/process/{pid}/stream", OperationID: "streamProcessLogs", Operation: "process.stream", Forwarded: true, Body: BodyNone},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/process/{pid}/wait-log", OperationID: "waitForLog", Operation: "process.waitForLog", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/process/{pid}/wait-port", OperationID: "waitForPort", Operation: "process.waitForPort", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/process/{pid}/wait-exit", OperationID: "waitForExit", Operation: "process.waitForExit", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/ports", OperationID: "exposePort", Operation: "port.expose"},
	{Method: "GET", Pattern: "/v1/sandboxes/{id}/ports", OperationID: "listPorts", Operation: "port.list"},
	{Method: "DELETE", Pattern: "/v1/sandboxes/{id}/ports/{port}", OperationID: "unexposePort", Operation: "port.unexpose"},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/backups", OperationID: "createBackup", Operation: "backup.create"},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/backups/{bid}/restore", OperationID: "restoreBackup", Operation: "backup.restore"},
	{Method: "GET", Pattern: "/v1/backups", OperationID: "listBackups", Operation: "backup.list"},
	{Method: "GET", Pattern: "/v1/backups/{bid}", OperationID: "getBackup", Operation: "backup.get"},
	{Method: "DELETE", Pattern: "/v1/backups/{bid}", OperationID: "deleteBackup", Operation: "backup.delete"},
	{Method: "GET", Pattern: "/v1/sandboxes/{id}/terminals", OperationID: "listTerminals", Operation: "terminal.list"},
	{Method: "GET", Pattern: "/v1/sandboxes/{id}/terminals/{tid}", OperationID: "terminal", Operation: "terminal.connect"},
	{Method: "DELETE", Pattern: "/v1/sandboxes/{id}/terminals/{tid}", OperationID: "killTerminal", Operation: "terminal.kill"},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/watch", OperationID: "watch", Operation: "watch", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/watch/check", OperationID: "checkChanges", Operation: "watch.check", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/contexts", OperationID: "createCodeContext", Operation: "code.contexts.create", Forwarded: true, Body: BodyJSON},
	{Method: "GET", Pattern: "/v1/sandboxes/{id}/contexts", OperationID: "listCodeContexts", Operation: "code.contexts.list", Forwarded: true, Body: BodyNone},
	{Method: "GET", Pattern: "/v1/sandboxes/{id}/contexts/{cid}", OperationID: "getCodeContext", Operation: "code.contexts.get", Forwarded: true, Body: BodyNone},
	{Method: "DELETE", Pattern: "/v1/sandboxes/{id}/contexts/{cid}", OperationID: "deleteCodeContext", Operation: "code.contexts.delete", Forwarded: true, Body: BodyNone},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/contexts/{cid}/run", OperationID: "runCode", Operation: "code.run", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/contexts/{cid}/interrupt", OperationID: "interruptCode", Operation: "code.interrupt", Forwarded: true, Body: BodyJSON},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/run-code", OperationID: "runCodeOnce", Operation: "code.run", Forwarded: true, Body: BodyJSON},
	{Method: "GET", Pattern: "/v1/images", OperationID: "listImages", Operation: "image.list"},
	{Method: "POST", Pattern: "/v1/images/build", OperationID: "buildImage", Operation: "image.build"},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/snapshots", OperationID: "createSnapshot", Operation: "snapshot.create"},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/fork", OperationID: "forkSandbox", Operation: "sandbox.fork"},
	{Method: "POST", Pattern: "/v1/sandboxes/{id}/restore-snapshot", OperationID: "restoreSnapshot", Operation: "snapshot.restore"},
	{Method: "GET", Pattern: "/v1/snapshots", OperationID: "listSnapshots", Operation: "snapshot.list"},
	{Method: "GET", Pattern: "/v1/snapshots/{sid}", OperationID: "getSnapshot", Operation: "snapshot.get"},
	{Method: "DELETE", Pattern: "/v1/snapshots/{sid}", OperationID: "deleteSnapshot", Operation: "snapshot.delete"},
	{Method: "GET", Pattern: "/v1/sandboxes/{id}/egress", OperationID: "getEgressPolicy", Operation: "egress.get"},
	{Method: "PUT", Pattern: "/v1/sandboxes/{id}/egress", OperationID: "putEgressPolicy", Operation: "egress.put"},
	{Method: "PATCH", Pattern: "/v1/sandboxes/{id}/egress", OperationID: "patchEgressPolicy", Operation: "egress.patch"},
	{Method: "GET", Pattern: "/v1/sandboxes/{id}/egress/events", OperationID: "egressEvents", Operation: "egress.events"},
	{Method: "GET", Pattern: "/v1/sandboxes/{id}/egress/ca.pem", OperationID: "getEgressCA", Operation: "egress.ca"},
	{Method: "GET", Pattern: "/v1/secrets", OperationID: "listSecrets", Operation: "secret.list"},
	{Method: "PUT", Pattern: "/v1/secrets/{name}", OperationID: "putSecret", Operation: "secret.set"},
	{Method: "DELETE", Pattern: "/v1/secrets/{name}", OperationID: "deleteSecret", Operation: "secret.delete"},
}
