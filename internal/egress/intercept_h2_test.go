package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/egress/egresstest"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/netns"
)

// countingClient is an HTTP/2 client whose connections are made inside n (to any address:
// the firewall redirects them and the proxy goes by SNI) and which trusts only caFile; dials
// counts its TCP connections.
func countingClient(t *testing.T, n *netns.Net, caFile string, dials *atomic.Int32) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dialFrom(t, n, "tcp", net.JoinHostPort(egresstest.APIIP, "443"))
		},
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: true,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

// TestInterceptHTTP2Streams covers EGRESS.md §8.2 item 8: a Go h2 client with two
// concurrent streams on one connection gets per-stream rules (each stream its own injected
// header), and a bidirectional gRPC-like stream (h2 on both legs) exchanges messages while
// both directions are open and keeps its trailers, with a reflected secret redacted in them.
func TestInterceptHTTP2Streams(t *testing.T) {
	const postKey = "post-key-secret-2468"
	ih, sb := newInterceptHarness(t, map[string]string{"API_TOKEN": apiToken, "POST_KEY": postKey}, policy.Spec{
		Rules: []policy.Rule{
			{ID: "api-post", Hosts: []string{"api.example.test"}, Match: &policy.Match{Methods: []string{"POST"}}, Action: policy.ActionInject,
				Inject: &policy.Inject{SetHeaders: map[string]string{"X-Post-Key": "${secrets.POST_KEY}"}}},
			{ID: "api", Hosts: []string{"api.example.test"}, Action: policy.ActionInject,
				Inject: &policy.Inject{SetHeaders: map[string]string{"Authorization": "Bearer ${secrets.API_TOKEN}"}}},
			{ID: "grpc", Hosts: []string{"grpc.example.test"}, Action: policy.ActionInject,
				Inject: &policy.Inject{SetHeaders: map[string]string{"Authorization": "Bearer ${secrets.API_TOKEN}"}}},
		},
	})

	t.Run("two concurrent streams, per-stream injection", func(t *testing.T) {
		var dials atomic.Int32
		hc := countingClient(t, sb, ih.caFile, &dials)
		// Stream 1 stays open (a slow stream) while stream 2 is sent on the same connection.
		slow, err := hc.Get("https://api.example.test/stream?chunks=3&ms=300")
		if err != nil {
			t.Fatal(err)
		}
		defer slow.Body.Close()
		if _, err := slow.Body.Read(make([]byte, 1)); err != nil {
			t.Fatalf("first chunk: %v", err)
		}
		fast, err := hc.Post("https://api.example.test/headers", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		var echo headersEcho
		err = json.NewDecoder(fast.Body).Decode(&echo)
		fast.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, slow.Body); err != nil {
			t.Fatalf("slow stream: %v", err)
		}
		if slow.ProtoMajor != 2 || fast.ProtoMajor != 2 || dials.Load() != 1 {
			t.Fatalf("protos %s %s over %d connections; want h2 over one", slow.Proto, fast.Proto, dials.Load())
		}
		var sawSlow, sawFast bool
		for _, r := range ih.net.APIRequests() {
			switch {
			case r.Path == "/stream":
				sawSlow = true
				if r.Header.Get("Authorization") != "Bearer "+apiToken || r.Header.Get("X-Post-Key") != "" {
					t.Errorf("GET stream got %v", r.Header)
				}
			case r.Path == "/headers" && r.Method == "POST":
				sawFast = true
				if r.Header.Get("X-Post-Key") != postKey || r.Header.Get("Authorization") != "" {
					t.Errorf("POST stream got %v", r.Header)
				}
			}
		}
		if !sawSlow || !sawFast {
			t.Fatalf("upstream saw stream %v post %v", sawSlow, sawFast)
		}
	})

	t.Run("bidirectional stream keeps trailers", func(t *testing.T) {
		g := ih.net.StartGRPC(t, "grpc.example.test")
		var dials atomic.Int32
		hc := countingClient(t, sb, ih.caFile, &dials)
		pr, pw := io.Pipe()
		defer pw.Close()
		req, _ := http.NewRequest("POST", "https://grpc.example.test/grpc", pr)
		req.Header.Set("Content-Type", "application/grpc+text")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
			t.Fatalf("status %s proto %s", resp.Status, resp.Proto)
		}
		br := bufio.NewReader(resp.Body)
		for i := 1; i <= 3; i++ {
			// Each answer must arrive while the request is still open (no buffering either way).
			if _, err := fmt.Fprintf(pw, "ping %d\n", i); err != nil {
				t.Fatal(err)
			}
			line, err := br.ReadString('\n')
			if err != nil || line != fmt.Sprintf("pong ping %d\n", i) {
				t.Fatalf("message %d: %q %v", i, line, err)
			}
		}
		pw.Close()
		if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
			t.Fatalf("end of stream: %q %v", rest, err)
		}
		if resp.Trailer.Get("Grpc-Status") != "0" || resp.Trailer.Get("Grpc-Message") != "3 messages" {
			t.Fatalf("trailers %v", resp.Trailer)
		}
		if got := resp.Trailer.Get("X-Seen-Authorization"); got != "Bearer [redacted:API_TOKEN]" {
			t.Fatalf("reflected trailer %q; want the injected value redacted", got)
		}
		hs := g.Headers()
		if len(hs) != 1 || hs[0].Get("Authorization") != "Bearer "+apiToken {
			t.Fatalf("grpc server saw %v", hs)
		}
	})
}

// TestInterceptLargeUpload covers EGRESS.md §8.2 item 10 (upload half): a 200 MiB streamed
// upload through an intercepted host completes and the proxy's heap (this process: proxy and
// fake internet) grows by less than 64 MiB while it runs.
func TestInterceptLargeUpload(t *testing.T) {
	const size = 200 << 20
	const ceiling = 64 << 20
	ih, sb := newInterceptHarness(t, map[string]string{"API_TOKEN": apiToken}, policy.Spec{
		Rules: []policy.Rule{{ID: "api", Hosts: []string{"api.example.test"}, Action: policy.ActionInject,
			Inject: &policy.Inject{SetHeaders: map[string]string{"Authorization": "Bearer ${secrets.API_TOKEN}"}}}},
	})
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	before := ih.net.Uploaded()
	// curl streams stdin (chunked, never held whole) to the intercepted host.
	out, err := run(sb, "sh", "-c", fmt.Sprintf("head -c %d /dev/zero | curl -sS --max-time 300 --cacert %s -T - https://api.example.test/upload", size, ih.caFile))
	close(stop)
	<-sampled
	if err != nil || strings.TrimSpace(out) != fmt.Sprintf(`{"bytes":%d}`, size) {
		t.Fatalf("upload: %v %q", err, out)
	}
	if got := ih.net.Uploaded() - before; got != size {
		t.Fatalf("upstream received %d bytes, want %d", got, size)
	}
	if reqs := ih.net.APIRequests(); reqs[len(reqs)-1].Header.Get("Authorization") != "Bearer "+apiToken {
		t.Fatal("upload request not injected")
	}
	growth := int64(peak.Load()) - int64(base.HeapAlloc)
	t.Logf("heap: base %d MiB, peak %d MiB, growth %d MiB", base.HeapAlloc>>20, peak.Load()>>20, growth>>20)
	if growth >= ceiling {
		t.Fatalf("heap grew by %d MiB during a %d MiB upload; want < %d MiB", growth>>20, size>>20, ceiling>>20)
	}
}
