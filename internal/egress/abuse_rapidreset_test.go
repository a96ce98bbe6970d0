package egress

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/hutchdev/hutch/internal/egress/egresstest"
	"github.com/hutchdev/hutch/internal/egress/policy"
)

// TestAbuseH2RapidReset is EGRESS.md §10 #10's h2 rapid-reset burst (CVE-2023-44487): on an
// intercepted host, the sandbox opens streams and resets each at once, thousands of times on
// one connection. The proxy must not turn them into thousands of upstream requests, must stay
// bounded, and a legitimate request on a new connection must still work afterwards.
func TestAbuseH2RapidReset(t *testing.T) {
	ih, sb := newInterceptHarness(t, map[string]string{"API_TOKEN": apiToken}, policy.Spec{
		Rules: []policy.Rule{{ID: "api", Hosts: []string{"api.example.test"}, Action: policy.ActionInject,
			Inject: &policy.Inject{SetHeaders: map[string]string{"Authorization": "Bearer ${secrets.API_TOKEN}"}}}},
	})
	pem, err := os.ReadFile(ih.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	raw, err := dialFrom(t, sb, "tcp", net.JoinHostPort(egresstest.APIIP, "443"))
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(raw, &tls.Config{ServerName: "api.example.test", RootCAs: pool, NextProtos: []string{"h2"}})
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "api.example.test"}, {":path", "/stream?chunks=50&ms=100"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	block := hb.Bytes()
	// Drain what the proxy sends (SETTINGS, GOAWAY, RST_STREAM…) so it never blocks on us.
	var goaway atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if _, ok := f.(*http2.GoAwayFrame); ok {
				goaway.Store(true)
			}
		}
	}()
	const bursts = 5000
	sent := 0
	for i := 0; i < bursts; i++ {
		id := uint32(2*i + 1)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
			break // the proxy closed the connection: also a fine answer
		}
		if err := fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			break
		}
		sent++
	}
	c.Close()
	<-done
	// Each reset stream may have reached upstream at most once; a proxy that kept requests
	// running after their reset would pile up open upstream streams.
	time.Sleep(500 * time.Millisecond)
	if n := ih.net.OpenStreams(); n > 100 {
		t.Errorf("%d upstream streams still open after the burst of %d resets", n, sent)
	}
	if n := len(ih.net.APIRequests()); n > sent {
		t.Errorf("%d upstream requests for %d reset streams", n, sent)
	}
	t.Logf("sent %d HEADERS+RST_STREAM pairs; proxy GOAWAY: %v; upstream requests: %d", sent, goaway.Load(), len(ih.net.APIRequests()))
	// A legitimate request on a new connection still gets its injected header.
	body, status, err := curl(sb, "--cacert", ih.caFile, "https://api.example.test/headers")
	if err != nil || status != "200" || !bytes.Contains([]byte(body), []byte(`[redacted:API_TOKEN]`)) {
		t.Fatalf("after the burst: %s %v %q", status, err, body)
	}
}
