package egresstest

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// GRPCIP is the address of the gRPC-like server StartGRPC adds to the fake internet.
const GRPCIP = "198.51.100.30"

// GRPCServer is a gRPC-like HTTP/2 server in the fake internet (EGRESS.md §8.2 item 8): TLS
// with the test leaf (any *.example.test name), HTTP/2 only. Its one route:
//
//	POST /grpc   bidirectional stream: every line of the request body is answered at once
//	             with "pong <line>\n" (flushed), while the request is still open; when the
//	             request body ends the response ends with the trailers Grpc-Status: 0,
//	             Grpc-Message: "<n> messages" and X-Seen-Authorization (the request's
//	             Authorization reflected, to test redaction of trailers). A request that is not
//	             HTTP/2 gets 505.
type GRPCServer struct {
	mu      sync.Mutex
	headers []http.Header
}

// StartGRPC adds GRPCIP to hxnet, points name (e.g. "grpc.example.test") at it in the DNS
// authority and serves the gRPC-like endpoint on GRPCIP:443 until t ends.
func (n *Internet) StartGRPC(t testing.TB, name string) *GRPCServer {
	t.Helper()
	if err := ipCmd("-n", InternetNS, "addr", "add", GRPCIP+"/32", "dev", "lo"); err != nil {
		t.Fatalf("egresstest: %v", err)
	}
	var ln net.Listener
	if err := n.inNS(func() error {
		var err error
		ln, err = net.Listen("tcp4", GRPCIP+":443")
		return err
	}); err != nil {
		ipCmd("-n", InternetNS, "addr", "del", GRPCIP+"/32", "dev", "lo")
		t.Fatalf("egresstest: grpc listener: %v", err)
	}
	n.SetRecord(name, GRPCIP)
	g := &GRPCServer{}
	cfg := n.tlsConfig()
	cfg.NextProtos = []string{"h2"}
	srv := &http.Server{Handler: http.HandlerFunc(g.serve), TLSConfig: cfg, ReadHeaderTimeout: 30 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeTLS(ln, "", "")
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
		ipCmd("-n", InternetNS, "addr", "del", GRPCIP+"/32", "dev", "lo")
	})
	return g
}

// Headers returns the request headers of every /grpc request served, in order.
func (g *GRPCServer) Headers() []http.Header {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]http.Header(nil), g.headers...)
}

func (g *GRPCServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/grpc" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	if r.ProtoMajor != 2 {
		http.Error(w, "HTTP/2 required", http.StatusHTTPVersionNotSupported)
		return
	}
	g.mu.Lock()
	g.headers = append(g.headers, r.Header.Clone())
	g.mu.Unlock()
	w.Header().Set("Trailer", "Grpc-Status, Grpc-Message, X-Seen-Authorization")
	w.Header().Set("Content-Type", "application/grpc+text")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fl.Flush()
	sc := bufio.NewScanner(r.Body)
	count := 0
	for sc.Scan() {
		count++
		fmt.Fprintf(w, "pong %s\n", strings.TrimSpace(sc.Text()))
		fl.Flush()
	}
	w.Header().Set("Grpc-Status", "0")
	w.Header().Set("Grpc-Message", fmt.Sprintf("%d messages", count))
	w.Header().Set("X-Seen-Authorization", r.Header.Get("Authorization"))
}
