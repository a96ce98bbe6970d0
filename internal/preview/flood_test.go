package preview

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/connlimit"
)

// TestPreviewFloodOfOneURL: whoever holds one sandbox's preview URL opens as many keep-alive
// connections as the listener's total, each sending a valid request, and keeps them idle or
// busy; another sandbox's preview URL must still answer on a new connection. The listener is
// wired as hutchd wires it (internal/daemon): a connlimit Limiter, ConnContext and ConnState.
func TestPreviewFloodOfOneURL(t *testing.T) {
	const total = 40
	tests := []struct {
		name string
		path string // what the flood's requests ask the sandbox's service
		busy bool   // the request never ends: the connection stays busy, not idle
	}{
		{"idle keep-alive connections", "/", false},
		{"requests the service never answers", "/hang", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			hang := make(chan struct{})
			t.Cleanup(func() { close(hang) })
			attacked := f.upstream(t, "sb1", 8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/hang" {
					w.WriteHeader(http.StatusOK)
					w.(http.Flusher).Flush()
					select {
					case <-hang:
					case <-r.Context().Done():
					}
					return
				}
				io.WriteString(w, "sb1")
			}))
			other := f.upstream(t, "sb2", 8080, hello())

			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			lim := connlimit.Limits{PerAddr: 256, Total: total, PerKey: total / 8}
			srv := &http.Server{
				Handler:           f.proxy,
				ReadHeaderTimeout: time.Minute,
				ConnContext:       connlimit.ConnContext,
				ConnState:         connlimit.ConnState,
			}
			go srv.Serve(connlimit.New("preview", lim, nil).Wrap(ln))
			t.Cleanup(func() { srv.Close() })
			addr := ln.Addr().String()

			// The flood: total connections, one valid request each, the answer's head read.
			var flood []net.Conn
			t.Cleanup(func() {
				for _, c := range flood {
					c.Close()
				}
			})
			host := strings.TrimPrefix(attacked, "http://")
			for i := range total {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				flood = append(flood, c)
				io.WriteString(c, "GET "+tt.path+" HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatalf("flood connection %d: %v", i, err)
				}
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("flood connection %d: %s", i, resp.Status)
				}
				if !tt.busy {
					io.ReadAll(resp.Body)
					resp.Body.Close()
				}
			}
			// Let the server see the idle connections as idle.
			time.Sleep(100 * time.Millisecond)

			// Another sandbox's visitor, on new connections.
			for i := range 3 {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+strings.TrimPrefix(other, "http://")+"\r\nConnection: close\r\n\r\n")
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					c.Close()
					t.Fatalf("request %d to the other sandbox's preview during the flood: %v", i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				c.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"xsn":"sb2"`) {
					t.Fatalf("request %d to the other sandbox's preview during the flood: %s %s", i, resp.Status, body)
				}
			}
		})
	}
}
