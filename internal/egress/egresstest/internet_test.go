package egresstest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/testutil"
)

func TestInternet(t *testing.T) {
	n := NewInternet(t, InternetConfig{GitToken: "s3cret-token"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// DNS: defaults, wildcard, query log.
	r := n.Resolver()
	for name, want := range map[string]string{"api.example.test": APIIP, "git.example.test": GitIP, "evil.example.test": SinkIP, "x.y.example.test": APIIP} {
		ips, err := r.LookupHost(ctx, name)
		if err != nil || len(ips) != 1 || ips[0] != want {
			t.Errorf("LookupHost(%s) = %v, %v; want %s", name, ips, err, want)
		}
	}
	if _, err := r.LookupHost(ctx, "nope.invalid"); err == nil {
		t.Error("nope.invalid resolved")
	}
	if !n.Asked("api.example.test") || n.Asked("never.example.test") {
		t.Errorf("query log wrong: %v", n.Queries())
	}

	// api over TLS (h2) and plain HTTP, trusted through CAPool.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: n.CAPool}, ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			_, port, _ := net.SplitHostPort(addr)
			return d.DialContext(ctx, network, net.JoinHostPort(APIIP, port))
		}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, u := range []string{"https://api.example.test/headers", "http://plain.example.test/headers"} {
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		req.Header.Set("X-Probe", "1")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		var got struct {
			Host    string
			Proto   string
			Headers map[string][]string
		}
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if got.Headers["X-Probe"] == nil || !strings.HasSuffix(got.Host, "example.test") {
			t.Errorf("%s echoed %+v", u, got)
		}
		if strings.HasPrefix(u, "https") && got.Proto != "HTTP/2.0" {
			t.Errorf("%s proto %s; want HTTP/2.0", u, got.Proto)
		}
	}
	resp, err := c.Get("http://api.example.test/redirect?to=/headers")
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Errorf("redirect: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// SSE needs the client's ack before each next event.
	resp, err = c.Get("https://api.example.test/sse?n=3&id=t1")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	for i := 1; i <= 3; i++ {
		k, err := resp.Body.Read(buf)
		if err != nil || !strings.Contains(string(buf[:k]), fmt.Sprintf("data: %d", i)) {
			t.Fatalf("sse event %d: %q %v", i, buf[:k], err)
		}
		if i < 3 {
			ack, err := c.Post(fmt.Sprintf("https://api.example.test/sse/ack?id=t1&n=%d", i), "", nil)
			if err != nil || ack.StatusCode != http.StatusNoContent {
				t.Fatalf("ack %d: %v %v", i, ack, err)
			}
			ack.Body.Close()
		}
	}
	resp.Body.Close()

	// Server-first TCP service.
	tc, err := net.DialTimeout("tcp", fmt.Sprintf("%s:%d", APIIP, TCPPort), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tc.SetDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 10)
	if _, err := io.ReadFull(tc, b); err != nil || string(b) != "hxnet-tcp\n" {
		t.Errorf("banner %q %v", b, err)
	}
	tc.Close()

	// Sink: any TCP port, TLS and HTTP answered and recorded.
	sc, err := net.DialTimeout("tcp", SinkIP+":8443", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(sc, "GET /leak?x=1 HTTP/1.1\r\nHost: evil.example.test\r\n\r\n")
	sc.SetDeadline(time.Now().Add(5 * time.Second))
	got, _ := io.ReadAll(io.LimitReader(sc, 200))
	sc.Close()
	if !strings.Contains(string(got), "sink") {
		t.Errorf("sink answered %q", got)
	}
	tlsc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: n.CAPool, ServerName: "evil.example.test"}}}
	if resp, err := tlsc.Get("https://" + SinkIP + "/tls-leak"); err != nil {
		t.Errorf("sink over TLS: %v", err)
	} else {
		resp.Body.Close()
	}
	uc, err := net.Dial("udp", SinkIP+":443")
	if err != nil {
		t.Fatal(err)
	}
	uc.Write([]byte("quic-ish"))
	uc.Close()
	var (
		hits            []SinkHit
		plain, sec, udp bool
	)
	if !testutil.Poll(t, 50*time.Millisecond, 10*time.Second, func() bool {
		hits = n.SinkHits()
		plain, sec, udp = false, false, false
		for _, h := range hits {
			plain = plain || (h.Port == 8443 && strings.Contains(string(h.Data), "/leak?x=1"))
			sec = sec || (h.Port == 443 && h.SNI == "evil.example.test" && strings.Contains(string(h.Data), "/tls-leak"))
			udp = udp || (h.Proto == "udp" && string(h.Data) == "quic-ish")
		}
		return plain && sec && udp
	}) {
		t.Fatalf("sink hits incomplete (plain=%v tls=%v udp=%v): %+v", plain, sec, udp, hits)
	}

	// git smart-HTTP needs the token.
	if _, err := exec.LookPath("git"); err == nil {
		lsRemote := func(url string) (string, error) {
			cmd := exec.CommandContext(ctx, "git", "-c", "http.sslCAInfo="+n.CAFile, "ls-remote", url)
			cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "GIT_TERMINAL_PROMPT=0"}
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		url := fmt.Sprintf("https://x-access-token:s3cret-token@%s/repo.git", GitIP)
		if out, err := lsRemote(url); err != nil || !strings.Contains(out, "refs/heads/main") {
			t.Errorf("git ls-remote with token: %v\n%s", err, out)
		}
		if out, err := lsRemote(fmt.Sprintf("https://x-access-token:wrong@%s/repo.git", GitIP)); err == nil {
			t.Errorf("git ls-remote with a wrong token succeeded:\n%s", out)
		}
	}
}
