// Package console serves hutchd's web console: the static files that scripts/build-console.sh
// builds into web/console/dist (index.html, app.js, app.css), under /console/ on the API
// listener. The files hold no secrets, so they are served without authentication; every API
// call the console makes carries the token its user typed.
//
// Files are opened through an os.Root on the directory, so no path (not "..", not an encoded
// variant, not a symlink) reaches outside it. Only regular files are served: no directory
// listings, no dot files. Every reply carries a strict Content-Security-Policy (scripts and
// connections from this origin only, no inline scripts; see CSP for styles), nosniff, and
// Cache-Control: no-cache (the browser revalidates, so a rebuilt console is picked up at once).
package console

import (
	"errors"
	"fmt"
	"html"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path"
	"strings"
)

// Prefix is the URL path the console is served under.
const Prefix = "/console/"

// CSP is the Content-Security-Policy of every reply. Scripts: only the console's own files (no
// inline scripts, no eval). Styles: the console's stylesheet, plus 'unsafe-inline' because
// xterm.js's DOM renderer injects <style> elements and style attributes at run time (its
// theme, cell colours and row sizes; xtermjs/xterm.js#4445); with img-src, font-src and
// connect-src limited to this origin, injected CSS could not send anything elsewhere.
// connect-src 'self' covers the API's fetches and the terminal WebSocket (ws: and wss:).
const CSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// contentTypes are the types of the files a console build holds; anything else is
// application/octet-stream (never sniffed: nosniff).
var contentTypes = map[string]string{
	".html":  "text/html; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".map":   "application/json; charset=utf-8",
	".json":  "application/json; charset=utf-8",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/x-icon",
	".woff2": "font/woff2",
	".txt":   "text/plain; charset=utf-8",
}

// Handler serves a console build directory. It is safe for concurrent use.
type Handler struct {
	dir string
	log *slog.Logger
}

// New returns a Handler serving dir (a built web/console/dist). The directory is opened per
// request, so it may be built or rebuilt while hutchd runs; an empty dir means the console is
// off, and every request gets a 503 page that says how to turn it on.
func New(dir string, log *slog.Logger) *Handler {
	return &Handler{dir: dir, log: log}
}

// ServeHTTP serves GET and HEAD of /console/<file>: /console/ is index.html, /console
// redirects to /console/. Other methods: 405. Paths with ".", "..", empty or dot-file
// segments, backslashes or NUL, directories and missing files: 404. A missing or unbuilt
// directory: 503 with a page that says how to build it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", CSP)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cache-Control", "no-cache")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	name, ok := fileName(r.URL.Path, r.URL.RawPath)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if h.dir == "" {
		h.unavailable(w, "The web console is off: this hutchd has no console directory.")
		return
	}
	root, err := os.OpenRoot(h.dir)
	if err != nil {
		h.log.WarnContext(r.Context(), "console directory cannot be opened", "dir", h.dir, "err", err)
		h.unavailable(w, "The web console is not built: its directory is missing.")
		return
	}
	defer root.Close()
	if _, err := root.Stat("index.html"); err != nil {
		h.log.WarnContext(r.Context(), "console directory has no index.html", "dir", h.dir)
		h.unavailable(w, "The web console is not built: its directory has no index.html.")
		return
	}
	f, err := root.Open(name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			h.log.DebugContext(r.Context(), "console file", "name", name, "err", err)
		}
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	ct, ok := contentTypes[strings.ToLower(path.Ext(name))]
	if !ok {
		ct = "application/octet-stream"
	}
	hdr.Set("Content-Type", ct)
	http.ServeContent(w, r, name, fi.ModTime(), f)
}

// fileName maps a request path (decoded, and raw when it had escapes) to a file name inside the
// directory, and reports false for anything that is not a plain file path below Prefix.
func fileName(p, raw string) (string, bool) {
	rest, ok := strings.CutPrefix(p, Prefix)
	if !ok {
		return "", false
	}
	if rest == "" {
		return "index.html", true
	}
	// An escaped slash ("a%2Fb") decodes into the path: refuse it rather than guess.
	if raw != "" && strings.Contains(strings.ToLower(raw), "%2f") {
		return "", false
	}
	if strings.ContainsAny(rest, "\\\x00") || !fs.ValidPath(rest) {
		return "", false
	}
	for seg := range strings.SplitSeq(rest, "/") {
		if strings.HasPrefix(seg, ".") {
			return "", false
		}
	}
	return rest, true
}

func (h *Handler) unavailable(w http.ResponseWriter, why string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Retry-After", "30")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintf(w, `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Hutch console unavailable</title></head>
<body><h1>Hutch web console unavailable</h1>
<p>%s</p>
<p>Build it from the repository with <code>scripts/build-console.sh</code> (needs Node.js 20+ and npm), then
start hutchd with <code>--console-dir /path/to/repo/web/console/dist</code> (or <code>HUTCH_CONSOLE_DIR</code>).
A hutchd run as <code>bin/hutchd</code> from the repository finds <code>web/console/dist</code> by itself.</p>
</body></html>
`, html.EscapeString(why))
}
