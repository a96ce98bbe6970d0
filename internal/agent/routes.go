package agent

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agentapi"
)

// handlerFunc handles one endpoint. A returned error is sent as an envelope; a handler that
// has started its reply (SSE) reports errors itself and returns nil.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// idHandlerFunc handles an endpoint whose path names a resource (a process, a code context, a
// terminal): id is the path wildcard's value.
type idHandlerFunc func(w http.ResponseWriter, r *http.Request, id string) error

// plain adapts a handler of a path without a wildcard.
func plain(h handlerFunc) idHandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, _ string) error { return h(w, r) }
}

// handlers maps each route of agentapi.Routes (by ID) to its handler.
func (s *Server) handlers() map[string]idHandlerFunc {
	return map[string]idHandlerFunc{
		"ping":              plain(s.handlePing),
		"createSession":     plain(s.handleSessionCreate),
		"listSessions":      plain(s.handleSessionList),
		"deleteSession":     plain(s.handleSessionDelete),
		"saveSessions":      plain(s.handleSessionSave),
		"execute":           plain(s.handleExecute),
		"executeStream":     plain(s.handleExecuteStream),
		"writeFile":         plain(s.handleWrite),
		"downloadFile":      plain(s.handleFileGet),
		"uploadFile":        plain(s.handleFilePut),
		"readFile":          plain(s.handleRead),
		"readFileStream":    plain(s.handleReadStream),
		"listFiles":         plain(s.handleListFiles),
		"mkdir":             plain(s.handleMkdir),
		"deleteFile":        plain(s.handleDelete),
		"renameFile":        plain(s.handleRename),
		"moveFile":          plain(s.handleMove),
		"exists":            plain(s.handleExists),
		"gitCheckout":       plain(s.handleGitCheckout),
		"archive":           plain(s.handleBackupArchive),
		"extract":           plain(s.handleBackupExtract),
		"watch":             plain(s.handleWatch),
		"checkChanges":      plain(s.handleWatchCheck),
		"startProcess":      s.handleProcessStart,
		"listProcesses":     s.handleProcessList,
		"killAllProcesses":  s.handleProcessKillAll,
		"getProcess":        s.handleProcessGet,
		"killProcess":       s.handleProcessKill,
		"getProcessLogs":    s.handleProcessLogs,
		"streamProcessLogs": s.handleProcessStream,
		"waitForLog":        s.handleProcessWaitLog,
		"waitForPort":       s.handleProcessWaitPort,
		"waitForExit":       s.handleProcessWaitExit,
		"listTerminals":     plain(s.handleTerminalList),
		"terminal":          s.handleTerminalConnect,
		"killTerminal":      s.handleTerminalKill,
		"createCodeContext": s.handleContextCreate,
		"listCodeContexts":  s.handleContextList,
		"getCodeContext":    s.handleContextGet,
		"deleteCodeContext": s.handleContextDelete,
		"runCode":           s.handleContextRun,
		"interruptCode":     s.handleContextInterrupt,
		"runCodeOnce":       plain(s.handleRunCode),
	}
}

// router serves agentapi.Routes: routes matches "METHOD /path" patterns; paths holds one
// method-less pattern per path, which answers 405 for the other methods, and a catch-all 404.
// Two muxes because one cannot hold both: a method-less /api/process/start would clash with
// GET /api/process/{pid}.
type router struct {
	routes *http.ServeMux
	paths  *http.ServeMux
}

// newRouter registers handlers for every route of agentapi.Routes. It panics when a route has
// no handler or a handler no route: the table and the handlers are one contract.
func (s *Server) newRouter() *router {
	handlers := s.handlers()
	rt := &router{routes: http.NewServeMux(), paths: http.NewServeMux()}
	byPath := map[string][]agentapi.Route{}
	var order []string
	for _, route := range agentapi.Routes {
		h, ok := handlers[route.ID]
		if !ok {
			panic("agent: no handler for route " + route.ID)
		}
		delete(handlers, route.ID)
		if _, seen := byPath[route.Pattern]; !seen {
			order = append(order, route.Pattern)
		}
		byPath[route.Pattern] = append(byPath[route.Pattern], route)
		rt.routes.Handle(route.MuxPattern(), s.serveRoute(route, h))
	}
	if len(handlers) > 0 {
		panic("agent: handlers without a route in agentapi.Routes")
	}
	for _, p := range order {
		rt.paths.Handle(p, s.methodNotAllowed(byPath[p]))
	}
	rt.paths.HandleFunc("/", s.notFound)
	return rt
}

// serveRoute serves one route: exactly its method (a GET route refuses HEAD, as the method
// table always did), the wildcard's value passed to h, errors as envelopes naming the route's
// operation.
func (s *Server) serveRoute(route agentapi.Route, h idHandlerFunc) http.Handler {
	wildcard := route.Wildcard()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != route.Method {
			s.router.paths.ServeHTTP(w, r)
			return
		}
		id := ""
		if wildcard != "" {
			id = r.PathValue(wildcard)
		}
		if err := h(w, r, id); err != nil {
			s.writeError(w, r, route.Operation, err)
		}
	})
}

// methodNotAllowed answers 405 METHOD_NOT_ALLOWED on a path whose routes are routes, with an
// Allow header. The envelope names the operation of the path's first route, except on the
// ID-addressed families (processes, code contexts), whose envelopes name none.
func (s *Server) methodNotAllowed(routes []agentapi.Route) http.Handler {
	methods := make([]string, len(routes))
	for i, r := range routes {
		methods[i] = r.Method
	}
	allow := strings.Join(methods, ", ")
	op := routes[0].Operation
	if p := routes[0].Pattern; strings.HasPrefix(p, "/api/process/") || p == "/api/contexts" || strings.HasPrefix(p, "/api/contexts/") {
		op = ""
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		s.writeError(w, r, op, errdefs.Newf(errdefs.CodeMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path))
	})
}

// ServeHTTP routes a request by agentapi.Routes. Unknown paths give 404 NOT_FOUND, known paths
// with another method 405 METHOD_NOT_ALLOWED. A route serves a request only when its path is
// the most specific one for it: GET /api/process/start is a refused method on the start path,
// not the process "start".
//
// Paths are matched as decoded, segment by segment: an escaped slash in an ID splits it (hutchd
// escapes IDs, so "a%2Fb" is the unknown path …/a/b, never the ID "a/b"), and "." or ".." is an
// ID like any other, never a step up. A path with an empty segment is unknown (ServeMux would
// redirect it instead).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, ok := muxPath(r.URL.Path)
	if !ok {
		s.notFound(w, r)
		return
	}
	r.URL.RawPath = raw
	_, path := s.router.paths.Handler(r)
	if _, pattern := s.router.routes.Handler(r); pattern != "" {
		if _, p, _ := strings.Cut(pattern, " "); p == path {
			s.router.routes.ServeHTTP(w, r)
			return
		}
	}
	s.router.paths.ServeHTTP(w, r)
}

// notFound answers 404 NOT_FOUND naming no operation.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, "", errdefs.Newf(errdefs.CodeNotFound, "unknown endpoint %s %s", r.Method, r.URL.Path))
}

// muxPath is path escaped again segment by segment, dot segments included, so that ServeMux,
// which matches escaped paths and cleans dot segments, matches the decoded segments; false when
// path has an empty segment (but a trailing one) or does not start with a slash.
func muxPath(path string) (string, bool) {
	if !strings.HasPrefix(path, "/") {
		return "", false
	}
	segs := strings.Split(path[1:], "/")
	for i, seg := range segs {
		switch seg {
		case "":
			if i != len(segs)-1 {
				return "", false
			}
		case ".":
			segs[i] = "%2E"
		case "..":
			segs[i] = "%2E%2E"
		default:
			segs[i] = url.PathEscape(seg)
		}
	}
	return "/" + strings.Join(segs, "/"), true
}
