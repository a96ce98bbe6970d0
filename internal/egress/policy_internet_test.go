package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/egresstest"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/netns"
	"github.com/hutchdev/hutch/internal/testutil"
	mdns "github.com/miekg/dns"
)

// internetHarness is an egress Service whose resolver is the fake internet's DNS authority,
// with an audit log, and one registered sandbox.
type internetHarness struct {
	*harness
	net   *egresstest.Internet
	audit *audit.Log
	sb    *netns.Net
}

func newInternetHarness(t *testing.T, cfg Config) *internetHarness {
	t.Helper()
	requirePrivileges(t)
	n := egresstest.NewInternet(t, egresstest.InternetConfig{})
	alog, err := audit.New(t.TempDir(), 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { alog.Close() })
	cfg.Resolver, cfg.Audit = n.Resolver(), alog
	h := newHarness(t, cfg)
	return &internetHarness{harness: h, net: n, audit: alog, sb: h.sandbox("inet1", 1, true)}
}

func (h *internetHarness) setPolicy(t *testing.T, js string) {
	t.Helper()
	var s policy.Spec
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatal(err)
	}
	if err := policy.Validate(s, policy.Lookups{}); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	c, err := policy.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.svc.SetPolicy(h.sb.ID, c); err != nil {
		t.Fatal(err)
	}
}

// events returns the sandbox's audit events of kind (all when empty) after a flush.
func (h *internetHarness) events(kind string) []audit.Event {
	h.audit.Flush()
	evs, _ := h.audit.Read(h.sb.ID, 0, 10000)
	var out []audit.Event
	for _, e := range evs {
		if kind == "" || e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func (h *internetHarness) curl(args ...string) (string, string, error) {
	return curl(h.sb, append([]string{"--cacert", h.net.CAFile}, args...)...)
}

// sinkEmpty fails t when the evil sink recorded anything.
func (h *internetHarness) sinkEmpty(t *testing.T, what string) {
	t.Helper()
	if hits := h.net.SinkHits(); len(hits) != 0 {
		t.Errorf("%s: the evil sink received %d hits, first %+v", what, len(hits), hits[0])
	}
}

// TestPolicyInternet covers EGRESS.md §8.2 items 1 (transparent), 2 (allow and deny), 13
// (audit), and abuse tests 3 (internal reach), 4 (L3/L4 bypass) and 5 (DNS exfiltration).
func TestPolicyInternet(t *testing.T) {
	h := newInternetHarness(t, Config{DNSRate: 100, DNSBurst: 200})

	// 1. Transparent, default policy (allow-all): no proxy settings anywhere.
	body, status, err := h.curl("http://plain.example.test/headers")
	if status != "200" || !strings.Contains(body, `"host":"plain.example.test"`) {
		t.Fatalf("plain http: %s %q %v", status, body, err)
	}
	body, status, err = h.curl("https://api.example.test/headers")
	if status != "200" || !strings.Contains(body, `"tls":true`) {
		t.Fatalf("https: %s %q %v", status, body, err)
	}
	// A tunnel's event is written when the spliced connection ends, which may be just after
	// curl has its answer: look again for a while.
	var sawHTTP, sawTunnel bool
	testutil.Poll(t, 50*time.Millisecond, 10*time.Second, func() bool {
		for _, e := range h.events("") {
			sawHTTP = sawHTTP || (e.Kind == audit.KindHTTP && e.OrigDst == egresstest.APIIP+":80" && e.Host == "plain.example.test" && e.Status == 200 && e.Decision == "allow")
			sawTunnel = sawTunnel || (e.Kind == audit.KindConn && e.OrigDst == egresstest.APIIP+":443" && e.Host == "api.example.test" && e.Decision == "tunnel")
		}
		return sawHTTP && sawTunnel
	})
	if !sawHTTP || !sawTunnel {
		t.Errorf("audit lacks the http (%v) or tunnel (%v) event: %+v", sawHTTP, sawTunnel, h.events(""))
	}

	// Abuse 3: internal reach under allow-all.
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://2852039166/", "http://0xA9FEA9FE/",
		"http://rebind.example.test/", "http://metadata.google.internal/", "http://127.0.0.1:9443/"} {
		body, status, _ := h.curl("--connect-timeout", "5", u)
		if status == "200" {
			t.Errorf("%s reached: %q", u, body)
		}
	}
	if r, err := query(t, h.sb, "10.1.1.1:53", "rebind.example.test", mdns.TypeA); err != nil || r.Rcode != mdns.RcodeNameError {
		t.Errorf("rebind.example.test answered %v %v; want NXDOMAIN (every answer is in the floor)", r, err)
	}

	// 2. Allow and deny.
	h.setPolicy(t, `{"mode":"allowlist","allow":["api.example.test","*.example.test"],"deny":["plain.example.test","evil.example.test","*.evil.example.test"]}`)
	if _, status, _ := h.curl("https://api.example.test/headers"); status != "200" {
		t.Errorf("allowed host: %s", status)
	}
	body, status, _ = h.curl("--resolve", "plain.example.test:80:"+egresstest.APIIP, "http://plain.example.test/headers")
	assertDenied(t, "denied host over http", body, status)
	if _, status, err := h.curl("https://evil.example.test/", "--resolve", "evil.example.test:443:"+egresstest.SinkIP); status == "200" || err == nil {
		t.Errorf("denied host over TLS: %s %v", status, err)
	}
	h.setPolicy(t, `{"mode":"allowlist","allow":["api.example.test"]}`)
	r, err := queryEDNS(t, h.sb, "10.1.1.1:53", "notlisted.example.test")
	if err != nil || r.Rcode != mdns.RcodeNameError {
		t.Fatalf("not-allowlisted name: %v %v; want NXDOMAIN", r, err)
	}
	if !hasEDE15(r) {
		t.Errorf("NXDOMAIN without EDE 15: %v", r)
	}
	if h.net.Asked("notlisted.example.test") {
		t.Error("a denied name was asked upstream")
	}
	if r, err := query(t, h.sb, "10.1.1.1:53", "api.example.test", mdns.TypeA); err != nil || len(aAnswers(r)) != 1 || aAnswers(r)[0] != egresstest.APIIP {
		t.Errorf("allowed name: %v %v", r, err)
	}
	var sawDNSDeny bool
	for _, e := range h.events(audit.KindDNS) {
		sawDNSDeny = sawDNSDeny || (e.QName == "notlisted.example.test" && e.Decision == "deny" && e.Rcode == "NXDOMAIN")
	}
	if !sawDNSDeny {
		t.Error("no dns deny audit event")
	}
	var sawUpdate bool
	for _, e := range h.events(audit.KindPolicyUpdated) {
		sawUpdate = sawUpdate || (e.Decision == "allowlist" && contains(e.Removed, "deny:evil.example.test"))
	}
	if !sawUpdate {
		t.Errorf("no policy.updated event with the diff: %+v", h.events(audit.KindPolicyUpdated))
	}

	// Abuse 4: L3/L4 bypass. "dig @198.51.100.53" is answered by hutchd (redirect), QUIC and
	// other ports never leave.
	if r, err := query(t, h.sb, egresstest.DNSIP+":53", "evil.example.test", mdns.TypeA); err != nil || r.Rcode != mdns.RcodeNameError {
		t.Errorf("direct query to the authority: %v %v", r, err)
	}
	if h.net.Asked("evil.example.test") {
		t.Error("evil.example.test reached the authority")
	}
	inNS(t, h.sb, func() {
		if c, err := net.Dial("udp", egresstest.SinkIP+":443"); err == nil {
			c.Write([]byte("quic initial"))
			c.Close()
		}
	})
	for _, port := range []string{"853", "22", "8080"} {
		if c, err := dialFrom(t, h.sb, "tcp", egresstest.SinkIP+":"+port); err == nil {
			c.SetDeadline(time.Now().Add(2 * time.Second))
			c.Write([]byte("hello"))
			c.Read(make([]byte, 1))
			c.Close()
		}
	}
	if out, err := run(h.sb, "ping", "-c", "1", "-W", "1", egresstest.SinkIP); err == nil {
		t.Errorf("ping got through: %s", out)
	}

	// Abuse 5: DNS exfiltration through denied names: nothing upstream, and the limiter engages.
	var wg sync.WaitGroup
	inNS(t, h.sb, func() {
		c, err := net.Dial("udp", "10.1.1.1:53")
		if err != nil {
			t.Error(err)
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			for i := 0; i < 2000; i++ {
				m := new(mdns.Msg)
				m.SetQuestion(fmt.Sprintf("%x.x.evil.example.test.", i*7919), []uint16{mdns.TypeA, mdns.TypeTXT, mdns.TypeHTTPS, mdns.TypeANY}[i%4])
				b, _ := m.Pack()
				c.Write(b)
			}
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 4096)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		}()
	})
	wg.Wait()
	if n := h.net.AskedSuffix("evil.example.test"); n != 0 {
		t.Errorf("%d exfiltration queries reached the authority", n)
	}
	if len(h.events(audit.KindLimit)) == 0 {
		t.Error("no limit event after a query flood")
	}
	h.sinkEmpty(t, "policy tests")
}

// queryEDNS asks for name's A records with EDNS0 from inside n.
func queryEDNS(t *testing.T, n *netns.Net, server, name string) (*mdns.Msg, error) {
	t.Helper()
	var r *mdns.Msg
	var err error
	inNS(t, n, func() {
		m := new(mdns.Msg)
		m.SetQuestion(mdns.Fqdn(name), mdns.TypeA)
		m.SetEdns0(4096, false)
		cl := &mdns.Client{Timeout: 3 * time.Second}
		r, _, err = cl.Exchange(m, server)
	})
	return r, err
}

func hasEDE15(r *mdns.Msg) bool {
	if o := r.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*mdns.EDNS0_EDE); ok && e.InfoCode == mdns.ExtendedErrorCodeBlocked {
				return true
			}
		}
	}
	return false
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestPolicyLiveUpdate covers EGRESS.md §8.2 item 12 and abuse test 9 (tunnel part): a
// tightening closes an open WebSocket (plain HTTP) and a long TLS download (tunnel), and new
// requests are denied; loosening takes effect without a restart.
func TestPolicyLiveUpdate(t *testing.T) {
	h := newInternetHarness(t, Config{})
	h.setPolicy(t, `{"mode":"allowlist","allow":["api.example.test","plain.example.test"]}`)

	// A long download through the TLS tunnel.
	name := h.sb.NSPath[strings.LastIndex(h.sb.NSPath, "/")+1:]
	dl := exec.Command("ip", "netns", "exec", name, "curl", "-sS", "--cacert", h.net.CAFile, "-o", "/dev/null", "https://api.example.test/stream?ms=50")
	dl.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp"}
	if err := dl.Start(); err != nil {
		t.Fatal(err)
	}
	dlDone := make(chan error, 1)
	go func() { dlDone <- dl.Wait() }()
	t.Cleanup(func() { dl.Process.Kill() })

	// A WebSocket over plain HTTP, from a socket inside the sandbox.
	raw, err := dialFrom(t, h.sb, "tcp", egresstest.APIIP+":80")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://plain.example.test/ws", &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) { return raw, nil }}}})
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, b, err := ws.Read(ctx); err != nil || string(b) != "echo:hi" {
		t.Fatalf("ws echo %q %v", b, err)
	}
	if !testutil.Poll(t, 50*time.Millisecond, 20*time.Second, func() bool { return h.net.OpenStreams() >= 1 }) {
		t.Fatal("download did not start")
	}

	// Tighten: neither host is allowed any more.
	h.setPolicy(t, `{"mode":"allowlist","allow":["git.example.test"]}`)
	select {
	case err := <-dlDone:
		if err == nil {
			t.Error("download ended successfully; want it cut")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("download still running after the tightening")
	}
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	if _, _, err := ws.Read(rctx); err == nil {
		t.Error("websocket still open after the tightening")
	}
	rcancel()
	if _, status, _ := h.curl("https://api.example.test/headers"); status == "200" {
		t.Error("new TLS connection allowed after the tightening")
	}
	body, status, _ := h.curl("--resolve", "plain.example.test:80:"+egresstest.APIIP, "http://plain.example.test/headers")
	assertDenied(t, "new HTTP request after the tightening", body, status)
	var closed int
	for _, e := range h.events(audit.KindConn) {
		if e.Decision == "closed" {
			closed++
		}
	}
	if closed < 2 {
		t.Errorf("%d closed events; want the download and the websocket", closed)
	}

	// A rule added for a tunneled host closes the tunnel too (its requests must now be seen).
	h.setPolicy(t, `{"mode":"allowlist","allow":["api.example.test"]}`)
	dl2 := exec.Command("ip", "netns", "exec", name, "curl", "-sS", "--cacert", h.net.CAFile, "-o", "/dev/null", "https://api.example.test/stream?ms=50")
	dl2.Env = dl.Env
	if err := dl2.Start(); err != nil {
		t.Fatal(err)
	}
	dl2Done := make(chan error, 1)
	go func() { dl2Done <- dl2.Wait() }()
	t.Cleanup(func() { dl2.Process.Kill() })
	if !testutil.Poll(t, 50*time.Millisecond, 20*time.Second, func() bool { return h.net.OpenStreams() >= 1 }) {
		t.Fatal("second download did not start (loosening not applied?)")
	}
	h.setPolicy(t, `{"mode":"allowlist","allow":["api.example.test"],"rules":[{"id":"no-stream","hosts":["api.example.test"],"match":{"path":{"prefix":"/stream"}},"action":"deny"}]}`)
	select {
	case err := <-dl2Done:
		if err == nil {
			t.Error("second download ended successfully; want it cut")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("tunnel kept open after a rule was added for its host")
	}

	// Loosening without a restart.
	h.setPolicy(t, `{"mode":"allowlist","allow":["plain.example.test"]}`)
	if _, status, _ := h.curl("http://plain.example.test/headers"); status != "200" {
		t.Errorf("after loosening: %s", status)
	}
	h.sinkEmpty(t, "live update")
}

// TestPolicyExhaustion covers abuse test 10's parser limits at the proxy: oversized
// headers are refused, 1-byte ClientHellos time out without blocking others, and a legitimate
// client still gets through.
func TestPolicyExhaustion(t *testing.T) {
	h := newInternetHarness(t, Config{})
	var conns []net.Conn
	for i := 0; i < 200; i++ {
		c, err := dialFrom(t, h.sb, "tcp", egresstest.APIIP+":443")
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		c.Write([]byte{0x16})
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if _, status, err := h.curl("https://api.example.test/headers"); status != "200" {
		t.Errorf("legitimate TLS client during a ClientHello stall: %s %v", status, err)
	}
	big := "X-Big: " + strings.Repeat("a", 70<<10)
	if _, status, _ := h.curl("-H", big, "http://plain.example.test/headers"); status != "431" {
		t.Errorf("70 KiB header: status %s; want 431", status)
	}
	h.sinkEmpty(t, "exhaustion")
}

// TestPolicyOtherPorts covers Spec.Ports through the other-port listener: a port the policy
// does not list is reset and audited, a listed one reaches the address hutchd's DNS served
// (server-first protocols included), unresolved addresses are refused, and removing the port
// live closes the connection.
func TestPolicyOtherPorts(t *testing.T) {
	h := newInternetHarness(t, Config{})
	tcpAddr := fmt.Sprintf("%s:%d", egresstest.APIIP, egresstest.TCPPort)
	banner := func() (net.Conn, string, error) {
		c, err := dialFrom(t, h.sb, "tcp", tcpAddr)
		if err != nil {
			return nil, "", err
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 10)
		n, err := io.ReadFull(c, b)
		return c, string(b[:n]), err
	}
	resolve := func(name string) {
		t.Helper()
		if r, err := query(t, h.sb, "10.1.1.1:53", name, mdns.TypeA); err != nil || len(aAnswers(r)) == 0 {
			t.Fatalf("resolve %s: %v %v", name, r, err)
		}
	}
	// Default policy: only 80 and 443.
	resolve("api.example.test")
	if c, got, err := banner(); err == nil {
		c.Close()
		t.Fatalf("port %d reached without being allowed: %q", egresstest.TCPPort, got)
	}
	h.setPolicy(t, `{"ports":[2222]}`)
	c, got, err := banner()
	if err != nil || got != "hxnet-tcp\n" {
		t.Fatalf("allowed port: %q %v", got, err)
	}
	c.Write([]byte("ping\n"))
	b := make([]byte, 5)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping\n" {
		t.Errorf("echo %q %v", b, err)
	}
	// An address no allowed name was served for.
	if sc, err := dialFrom(t, h.sb, "tcp", egresstest.SinkIP+":2222"); err == nil {
		sc.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := sc.Read(make([]byte, 1)); err == nil {
			t.Error("unresolved address answered")
		}
		sc.Close()
	}
	// Live: the port goes away, the open connection is closed.
	h.setPolicy(t, `{"ports":[8443]}`)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("connection survived the removal of its port")
	}
	c.Close()
	var refused, tunnel bool
	for _, e := range h.events(audit.KindConn) {
		refused = refused || (e.Mode == "tcp" && e.Decision == "refused" && e.Port == egresstest.TCPPort)
		tunnel = tunnel || (e.Mode == "tcp" && e.Decision == "tunnel" && e.Host == "api.example.test")
	}
	if !refused || !tunnel {
		t.Errorf("audit: refused %v tunnel %v", refused, tunnel)
	}
	h.sinkEmpty(t, "other ports")
}
