// Command previewtarget is a small HTTP server that tests and benchmarks run inside a sandbox
// and reach through preview URLs. It is built static (CGO_ENABLED=0) and copied into the
// sandbox with the files API.
//
// Endpoints:
//
//	GET  /            "hello from previewtarget\n"
//	GET  /small       "ok" (2 bytes; latency benchmark)
//	GET  /headers     the request's Host and headers as JSON {"host", "headers": {name: [values]}}
//	GET  /big?mib=N   N MiB (default 1) of a deterministic byte pattern, with Content-Length;
//	                  byte i is byte(i*7 + i>>12)
//	GET  /sse?n=N&gapMs=G  N SSE events "data: {\"i\":k,\"sentUnixMs\":t}\n\n", G ms apart, flushed each
//	POST /sum         the SHA-256 (hex) and length of the streamed request body
//	GET  /ws          WebSocket echo (coder/websocket): every message is sent back as received
//
// Usage: previewtarget [-listen 127.0.0.1:8080]...
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var addrs listFlag
	flag.Var(&addrs, "listen", "address to listen on, repeatable (default 127.0.0.1:8080)")
	flag.Parse()
	if len(addrs) == 0 {
		addrs = listFlag{"127.0.0.1:8080"}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from previewtarget\n")
	})
	mux.HandleFunc("GET /small", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2")
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("GET /headers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"host": r.Host, "uri": r.RequestURI, "headers": r.Header})
	})
	mux.HandleFunc("GET /big", big)
	mux.HandleFunc("GET /sse", sse)
	mux.HandleFunc("POST /sum", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%s %d\n", hex.EncodeToString(h.Sum(nil)), n)
	})
	mux.HandleFunc("GET /ws", echo)
	errc := make(chan error, len(addrs))
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Fprintf(os.Stdout, "previewtarget listening on %s\n", ln.Addr())
		go func() { errc <- http.Serve(ln, mux) }()
	}
	log.Fatal(<-errc)
}

// Pattern returns byte i of /big's body.
func pattern(i int64) byte { return byte(i*7 + i>>12) }

func big(w http.ResponseWriter, r *http.Request) {
	mib, err := strconv.Atoi(r.URL.Query().Get("mib"))
	if err != nil || mib <= 0 {
		mib = 1
	}
	total := int64(mib) << 20
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(total, 10))
	buf := make([]byte, 64<<10)
	for off := int64(0); off < total; off += int64(len(buf)) {
		for i := range buf {
			buf[i] = pattern(off + int64(i))
		}
		if _, err := w.Write(buf); err != nil {
			return
		}
	}
}

func sse(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.URL.Query().Get("n"))
	if n <= 0 {
		n = 5
	}
	gap, _ := strconv.Atoi(r.URL.Query().Get("gapMs"))
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	for i := range n {
		if i > 0 && gap > 0 {
			select {
			case <-time.After(time.Duration(gap) * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprintf(w, "data: {\"i\":%d,\"sentUnixMs\":%d}\n\n", i, time.Now().UnixMilli())
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

func echo(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(16 << 20)
	ctx := r.Context()
	for {
		typ, msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		if err := c.Write(ctx, typ, msg); err != nil {
			return
		}
	}
}
