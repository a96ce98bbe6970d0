package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/egress/egresstest"
	"github.com/hutchdev/hutch/internal/netns"
	mdns "github.com/miekg/dns"
)

// upstreams are fake "internet" servers on host loopback, reachable by sandboxes only as
// operator upstreams.
type upstreams struct {
	web, tls *httptest.Server
	hits     atomic.Int64 // requests the web server saw
}

func newUpstreams(t *testing.T) *upstreams {
	u := &upstreams{}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo:"), b...)); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		fmt.Fprintf(w, "web:%s%s", r.Host, r.URL.Path)
	})
	u.web = httptest.NewServer(mux)
	u.tls = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls:%s%s", r.Host, r.URL.Path)
	}))
	t.Cleanup(func() {
		u.web.Close()
		u.tls.Close()
	})
	return u
}

func hostPort(s *httptest.Server) string {
	return strings.TrimPrefix(strings.TrimPrefix(s.URL, "http://"), "https://")
}

// query asks server (ip:port, seen from inside n) for name/qtype over UDP from inside n.
func query(t *testing.T, n *netns.Net, server, name string, qtype uint16) (*mdns.Msg, error) {
	t.Helper()
	var r *mdns.Msg
	err := errors.New("namespace not entered")
	inNS(t, n, func() {
		var c net.Conn
		c, err = net.Dial("udp", server)
		if err != nil {
			return
		}
		defer c.Close()
		m := new(mdns.Msg)
		m.SetQuestion(mdns.Fqdn(name), qtype)
		cl := &mdns.Client{Timeout: 3 * time.Second}
		r, _, err = cl.ExchangeWithConn(m, &mdns.Conn{Conn: c})
	})
	return r, err
}

func aAnswers(r *mdns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*mdns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out
}

func assertDenied(t *testing.T, what, body, status string) {
	t.Helper()
	if status != "403" {
		t.Errorf("%s: status %s (body %q); want 403", what, status, body)
		return
	}
	var env errdefs.Envelope
	if err := json.Unmarshal([]byte(body), &env); err != nil || env.Code != errdefs.CodeEgressDenied {
		t.Errorf("%s: body %q (%v); want EGRESS_DENIED envelope", what, body, err)
	}
}

func TestEgress(t *testing.T) {
	requirePrivileges(t)
	up := newUpstreams(t)
	auth := egresstest.NewAuthority(t, map[string][]string{
		"rebind.test": {"127.0.0.1"},
		"meta.test":   {"169.254.169.254"},
		"lan.test":    {"192.168.1.10", "10.1.2.3"},
	})
	h := newHarness(t, Config{
		Upstreams: map[string]string{"web.test": hostPort(up.web), "tls.test": hostPort(up.tls)},
		Resolver:  auth.Resolver(),
	})
	sb1 := h.sandbox("sb1", 1, true)
	sb2 := h.sandbox("sb2", 2, true)
	gw := sb1.Gateway.String()

	t.Run("DNS", func(t *testing.T) {
		// Any resolver address is redirected to hutchd.
		for _, server := range []string{gw + ":53", "198.51.100.53:53"} {
			r, err := query(t, sb1, server, "web.test", mdns.TypeA)
			if err != nil {
				t.Fatalf("A web.test via %s: %v", server, err)
			}
			if got := aAnswers(r); len(got) != 1 || got[0] != gw {
				t.Errorf("A web.test via %s = %v; want [%s]", server, got, gw)
			}
		}
		r, err := query(t, sb2, sb2.Gateway.String()+":53", "web.test", mdns.TypeA)
		if err != nil || len(aAnswers(r)) != 1 || aAnswers(r)[0] != sb2.Gateway.String() {
			t.Errorf("A web.test from sb2 = %v, %v; want its own gateway %s", r, err, sb2.Gateway)
		}
		r, err = query(t, sb1, gw+":53", "web.test", mdns.TypeAAAA)
		if err != nil || r.Rcode != mdns.RcodeSuccess || len(r.Answer) != 0 {
			t.Errorf("AAAA web.test = %v, %v; want NOERROR empty", r, err)
		}
		for _, name := range []string{"rebind.test", "meta.test", "lan.test", "localhost"} {
			r, err := query(t, sb1, gw+":53", name, mdns.TypeA)
			if err != nil || r.Rcode != mdns.RcodeNameError {
				t.Errorf("A %s = %v, %v; want NXDOMAIN", name, r, err)
			}
		}
	})

	t.Run("HTTPTransparent", func(t *testing.T) {
		// Whatever address the sandbox connects to, the proxy dials the name it authorised.
		for _, ip := range []string{gw, "198.51.100.7"} {
			body, status, err := curl(sb1, "--resolve", "web.test:80:"+ip, "http://web.test/hello")
			if err != nil || status != "200" || body != "web:web.test/hello" {
				t.Errorf("curl http://web.test/hello via %s = %q %s %v", ip, body, status, err)
			}
		}
	})

	t.Run("WebSocket", func(t *testing.T) {
		c, err := dialFrom(t, sb1, "tcp", gw+":80")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return c, nil }}
		ws, _, err := websocket.Dial(ctx, "ws://web.test/ws", &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			c.Close()
			t.Fatalf("websocket dial: %v", err)
		}
		defer ws.CloseNow()
		if err := ws.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
			t.Fatal(err)
		}
		_, b, err := ws.Read(ctx)
		if err != nil || string(b) != "echo:hi" {
			t.Errorf("websocket echo = %q, %v; want echo:hi", b, err)
		}
	})

	t.Run("TLSSplice", func(t *testing.T) {
		body, status, err := curl(sb1, "-k", "--resolve", "tls.test:443:"+gw, "https://tls.test/secure")
		if err != nil || status != "200" || body != "tls:tls.test/secure" {
			t.Errorf("curl https://tls.test/secure = %q %s %v", body, status, err)
		}
	})

	t.Run("FloorRefused", func(t *testing.T) {
		for _, host := range []string{"rebind.test", "meta.test", "lan.test", "localhost", "metadata.google.internal"} {
			body, status, _ := curl(sb1, "--resolve", host+":80:"+gw, "http://"+host+"/")
			assertDenied(t, "http://"+host, body, status)
		}
		for _, hdr := range []string{"127.0.0.1", "169.254.169.254", "10.99.0.1", "[::1]", "192.0.2.2"} {
			body, status, _ := curl(sb1, "-H", "Host: "+hdr, "http://"+gw+"/")
			assertDenied(t, "Host: "+hdr, body, status)
		}
		body, status, _ := curl(sb1, "http://169.254.169.254/latest/meta-data/")
		assertDenied(t, "http://169.254.169.254", body, status)
		// TLS: a refused name, and no SNI at all (IP URL), both end in a closed connection.
		for _, args := range [][]string{
			{"-k", "--resolve", "rebind.test:443:" + gw, "https://rebind.test/"},
			{"-k", "https://198.51.100.7/"},
		} {
			if _, status, err := curl(sb1, args...); err == nil || status != "000" {
				t.Errorf("curl %v = status %s, %v; want a failed connection", args, status, err)
			}
		}
	})

	t.Run("HostServicesUnreachable", func(t *testing.T) {
		// A "hutchd API" on all host addresses: reachable on loopback, not from a sandbox.
		api, err := net.Listen("tcp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		defer api.Close()
		go func() {
			for {
				c, err := api.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		port := api.Addr().(*net.TCPAddr).Port
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 3*time.Second); err != nil {
			t.Fatalf("host loopback cannot reach the test API: %v", err)
		} else {
			c.Close()
		}
		var wg sync.WaitGroup
		for _, addr := range []string{
			fmt.Sprintf("%s:%d", gw, port),
			fmt.Sprintf("%s:%d", sb2.Gateway, port),
			fmt.Sprintf("192.0.2.2:%d", port),
			fmt.Sprintf("198.51.100.7:%d", port),
			fmt.Sprintf("%s:%d", gw, testHTTPPort), // the proxy itself, not redirected
			fmt.Sprintf("%s:%d", gw, testTLSPort),
			fmt.Sprintf("%s:%d", gw, testDNSPort),
			fmt.Sprintf("%s:%d", gw, testTLSPort+1), // the other-port listener
			fmt.Sprintf("%s:22", gw),
		} {
			// Dropped SYNs time out; run the probes side by side. The other-port listener
			// completes the handshake, then resets: a reset is a refusal, EOF or data a reach.
			wg.Go(func() {
				if c, err := dialFrom(t, sb1, "tcp4", addr); err == nil {
					c.SetReadDeadline(time.Now().Add(3 * time.Second))
					_, rerr := c.Read(make([]byte, 1))
					c.Close()
					if rerr == nil || errors.Is(rerr, io.EOF) {
						t.Errorf("sandbox reached %s", addr)
					}
				}
			})
		}
		wg.Wait()
		// DNS straight to the listener's port (not 53, so not redirected) is dropped.
		if r, err := query(t, sb1, fmt.Sprintf("%s:%d", gw, testDNSPort), "web.test", mdns.TypeA); err == nil {
			t.Errorf("direct DNS query to %s:%d answered: %v", gw, testDNSPort, r)
		}
	})

	t.Run("SandboxIsolation", func(t *testing.T) {
		var ln net.Listener
		var err error
		inNS(t, sb1, func() { ln, err = net.Listen("tcp4", "0.0.0.0:8080") })
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("sb1"))
				c.Close()
			}
		}()
		if c, err := dialFrom(t, sb2, "tcp4", sb1.Addr.String()+":8080"); err == nil {
			// The other-port listener accepts, then resets; sb1 would have written "sb1".
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			n, _ := c.Read(make([]byte, 3))
			c.Close()
			if n > 0 {
				t.Errorf("sb2 reached sb1's listener at %s:8080", sb1.Addr)
			}
		}
		// Port 80 to a sandbox address is proxied, and the proxy refuses IP destinations.
		body, status, _ := curl(sb2, "http://"+sb1.Addr.String()+"/")
		assertDenied(t, "sb2 → sb1:80", body, status)
	})

	t.Run("UDPDropped", func(t *testing.T) {
		pc, err := net.ListenPacket("udp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		port := pc.LocalAddr().(*net.UDPAddr).Port
		inNS(t, sb1, func() {
			c, err := net.Dial("udp4", net.JoinHostPort(gw, strconv.Itoa(port)))
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for range 3 {
				c.Write([]byte("leak"))
			}
		})
		pc.SetReadDeadline(time.Now().Add(time.Second))
		if n, from, err := pc.ReadFrom(make([]byte, 64)); err == nil {
			t.Errorf("host received %d UDP bytes from %s", n, from)
		}
	})

	t.Run("IPv6Disabled", func(t *testing.T) {
		if c, err := dialFrom(t, sb1, "tcp6", "[fe80::1%eth0]:80"); err == nil {
			c.Close()
			t.Error("IPv6 connection from the sandbox succeeded")
		}
		if out, _ := run(sb1, "cat", "/proc/sys/net/ipv6/conf/all/disable_ipv6"); strings.TrimSpace(out) != "1" {
			t.Errorf("sandbox disable_ipv6 = %q; want 1", out)
		}
	})

	t.Run("SpoofedSource", func(t *testing.T) {
		// sb1 claims sb2's address: dropped before the proxy sees it.
		if out, err := run(sb1, "ip", "addr", "add", sb2.Addr.String()+"/32", "dev", "eth0"); err != nil {
			t.Fatalf("add spoof address: %v %s", err, out)
		}
		defer run(sb1, "ip", "addr", "del", sb2.Addr.String()+"/32", "dev", "eth0")
		before := up.hits.Load()
		_, status, err := curl(sb1, "--max-time", "3", "--interface", sb2.Addr.String(), "--resolve", "web.test:80:"+gw, "http://web.test/spoof")
		if err == nil || status != "000" {
			t.Errorf("spoofed request got status %s, %v; want no connection", status, err)
		}
		if up.hits.Load() != before {
			t.Error("spoofed request reached the upstream")
		}
	})

	t.Run("RemoveSandbox", func(t *testing.T) {
		ctx := t.Context()
		if err := h.svc.RemoveSandbox(ctx, "sb2"); err != nil {
			t.Fatal(err)
		}
		if _, status, err := curl(sb2, "--max-time", "3", "--resolve", "web.test:80:"+sb2.Gateway.String(), "http://web.test/"); err == nil || status != "000" {
			t.Errorf("removed sandbox got status %s, %v; want no connection", status, err)
		}
		if err := h.svc.RemoveSandbox(ctx, "sb2"); err != nil {
			t.Errorf("RemoveSandbox again: %v", err)
		}
		if err := h.svc.AddSandbox(ctx, "sb2", sb2.HostIf, sb2.Gateway, sb2.Addr); err != nil {
			t.Fatal(err)
		}
		if body, status, err := curl(sb2, "--resolve", "web.test:80:"+sb2.Gateway.String(), "http://web.test/back"); err != nil || body != "web:web.test/back" {
			t.Errorf("re-added sandbox = %q %s %v", body, status, err)
		}
	})
}

func TestAddSandboxConflicts(t *testing.T) {
	svc, err := New(Config{Table: testTable, IfPrefix: testIfPrefix}, nil)
	if errors.Is(err, errdefs.ErrUnavailable) {
		t.Skip("nft missing")
	}
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr
	ctx := t.Context()
	if err := svc.AddSandbox(ctx, "a", "hst1", a("10.99.0.5"), a("10.99.0.6")); err != nil {
		t.Fatal(err)
	}
	if err := svc.AddSandbox(ctx, "a", "hst1", a("10.99.0.5"), a("10.99.0.6")); err != nil {
		t.Errorf("identical re-add: %v", err)
	}
	for _, tt := range []struct {
		id, ifc string
		addr    string
		want    error
	}{
		{"a", "hst2", "10.99.0.10", errdefs.ErrConflict},
		{"b", "hst1", "10.99.0.10", errdefs.ErrConflict},
		{"b", "hst2", "10.99.0.6", errdefs.ErrConflict},
		{"", "hst2", "10.99.0.10", errdefs.ErrInvalidArgument},
		{"b", "hst2", "fd00::1", errdefs.ErrInvalidArgument},
	} {
		ip, _ := netip.ParseAddr(tt.addr)
		if err := svc.AddSandbox(ctx, tt.id, tt.ifc, a("10.99.0.9"), ip); !errors.Is(err, tt.want) {
			t.Errorf("AddSandbox(%q, %q, %s) = %v; want %v", tt.id, tt.ifc, tt.addr, err, tt.want)
		}
	}
}

func TestNewValidates(t *testing.T) {
	for _, cfg := range []Config{
		{Upstreams: map[string]string{"Git.Internal": "127.0.0.1:1"}},
		{Upstreams: map[string]string{"git.internal": "localhost:1"}},
		{Upstreams: map[string]string{"git.internal": "127.0.0.1"}},
		{Upstreams: map[string]string{"127.0.0.1": "127.0.0.1:1"}},
		{DNSPort: 1, HTTPPort: 1},
		{Table: "bad table"},
	} {
		if _, err := New(cfg, nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("New(%+v) = %v; want ErrInvalidArgument", cfg, err)
		}
	}
}

// TestRegistry fetches a real package manifest through the TLS splice with the default
// resolver (the build hosts' registries resolve to 203.0.113.80, a documentation address
// outside the floor).
func TestRegistry(t *testing.T) {
	requirePrivileges(t)
	reg := npmRegistry(t)
	host, port := reg.Hostname(), reg.Port()
	if port == "" {
		port = "443"
	}
	ips, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip4", host)
	if err != nil || len(ips) == 0 {
		t.Skipf("%s does not resolve here: %v", host, err)
	}
	cas, _ := filepath.Glob("/usr/local/share/ca-certificates/*.crt")
	if len(cas) == 0 {
		t.Skip("no workplace CA in /usr/local/share/ca-certificates")
	}
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	var pem []byte
	for _, f := range append(cas, "/etc/ssl/certs/ca-certificates.crt") {
		b, err := os.ReadFile(f)
		if err == nil {
			pem = append(append(pem, b...), '\n')
		}
	}
	if err := os.WriteFile(bundle, pem, 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{})
	sb := h.sandbox("reg", 7, true)
	r, err := query(t, sb, sb.Gateway.String()+":53", host, mdns.TypeA)
	if err != nil || len(aAnswers(r)) == 0 {
		t.Fatalf("A %s from the sandbox = %v, %v", host, r, err)
	}
	ip := aAnswers(r)[0]
	body, status, err := curl(sb, "--cacert", bundle, "--resolve", host+":"+port+":"+ip, strings.TrimSuffix(reg.String(), "/")+"/is-number")
	var doc struct {
		Name string `json:"name"`
	}
	if err != nil || status != "200" || json.Unmarshal([]byte(body), &doc) != nil || doc.Name != "is-number" {
		t.Errorf("registry fetch = status %s, %v, body %.200q", status, err, body)
	}
}

// npmRegistry returns the package registry that the host's npm uses (`npm config get
// registry`), a server this machine is known to reach, or skips the test when npm has none
// over HTTPS.
func npmRegistry(t *testing.T) *url.URL {
	t.Helper()
	out, err := exec.Command("npm", "config", "get", "registry").Output()
	if err != nil {
		t.Skipf("npm config get registry: %v", err)
	}
	u, err := url.Parse(strings.TrimSpace(string(out)))
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		t.Skipf("npm's registry %q is not an https URL (%v)", strings.TrimSpace(string(out)), err)
	}
	return u
}
