package egresstest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/netns"
	"github.com/hutchdev/hutch/internal/testutil"
	mdns "github.com/miekg/dns"
)

// The fake internet's fixed addresses (EGRESS.md §8.1, moved to 198.51.100.0/24 because this
// project's build hosts reach their package registries through 203.0.113.0/24).
const (
	InternetNS     = "hxnet"           // network namespace holding every server
	InternetPrefix = "198.51.100.0/24" // routed from the host into hxnet
	APIIP          = "198.51.100.10"   // "api" echo server: :80, :443 (h1+h2), :2222 (server-first TCP)
	GitIP          = "198.51.100.20"   // git smart-HTTP: :443 and :80, Basic auth required
	DNSIP          = "198.51.100.53"   // DNS authority: :53 UDP+TCP, query log
	SinkIP         = "198.51.100.66"   // evil sink: every TCP and UDP port, records everything
	TCPPort        = 2222              // api's server-first TCP service: sends "hxnet-tcp\n", then echoes

	hostIf   = "hxnet0"
	peerIf   = "hxnet1"
	hostAddr = "10.251.100.1/30"
	peerAddr = "10.251.100.2/30"
	peerIP   = "10.251.100.2"
	sinkPort = 9
	lockPath = "/run/hutch-hxnet.lock"
)

// InternetConfig configures NewInternet. The zero value is usable.
type InternetConfig struct {
	// GitUser and GitToken are the only Basic credentials the git server accepts (username
	// default "x-access-token", token default "hxnet-git-token").
	GitUser, GitToken string
	// Records are extra DNS A records (name without trailing dot → IPv4 strings), added to the
	// defaults: example.test and *.example.test → api, git.example.test → git,
	// evil.example.test → sink, rebind.example.test → 10.0.0.1, 127.0.0.1, 169.254.169.254,
	// v6only.example.test → AAAA only.
	Records map[string][]string
}

// Internet is the fake internet: network namespace hxnet with a veth to the host and a host
// route for 198.51.100.0/24 through it, running the api echo server, the git server, the DNS
// authority and the evil sink. Only one exists per machine at a time: NewInternet waits on a
// machine-wide lock (/run/hutch-hxnet.lock), so tests of several packages serialise on it.
type Internet struct {
	// CAPEM is the PEM of the test CA that signed the api and git certificates (names
	// example.test, *.example.test and the IPs of api and git); CAFile holds it on disk and
	// CAPool holds it as a pool. Give it to the proxy as an extra root and to clients.
	CAPEM  []byte
	CAFile string
	CAPool *x509.CertPool
	// GitUser and GitToken are the accepted git credentials; RepoPath is the URL path of the
	// one repository ("/repo.git", one commit with README containing "hello from hxnet").
	GitUser, GitToken, RepoPath string
	// NSPath is the namespace's path (/var/run/netns/hxnet).
	NSPath string

	cert    tls.Certificate
	records map[string][]netip.Addr
	servers []func()
	wg      sync.WaitGroup

	mu sync.Mutex
	// queries, sink, requests, uploaded and streams are what the servers observed.
	queries  []Query
	sink     []*SinkHit
	requests []APIRequest
	uploaded int64
	streams  int
	acks     map[string]chan int
}

// Query is one question the DNS authority received.
type Query struct {
	Name string // canonical: lower case, no trailing dot
	Type string // "A", "AAAA", "TXT", ...
}

// SinkHit is one connection or datagram the evil sink received.
type SinkHit struct {
	Proto string         // "tcp" or "udp"
	Port  int            // original destination port (TCP; 0 for UDP)
	From  netip.AddrPort // source as seen in hxnet
	SNI   string         // TLS server name when the client spoke TLS
	Data  []byte         // bytes received (decrypted for TLS), at most 64 KiB
}

// APIRequest is one request the api server handled.
type APIRequest struct {
	Method, Host, Path, Proto string
	TLS                       bool
	Header                    http.Header
}

// NewInternet sets up the fake internet and tears it down when t ends. It skips t when not
// root or when ip, nft or git is missing.
func NewInternet(t testing.TB, cfg InternetConfig) *Internet {
	t.Helper()
	testutil.RequiresRoot(t, "fake internet: network namespaces")
	for _, tool := range []string{"ip", "nft", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("fake internet needs %s", tool)
		}
	}
	if cfg.GitUser == "" {
		cfg.GitUser = "x-access-token"
	}
	if cfg.GitToken == "" {
		cfg.GitToken = "hxnet-git-token"
	}
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("egresstest: lock: %v", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		t.Fatalf("egresstest: lock: %v", err)
	}
	n := &Internet{GitUser: cfg.GitUser, GitToken: cfg.GitToken, RepoPath: "/repo.git",
		NSPath: "/var/run/netns/" + InternetNS, records: map[string][]netip.Addr{}, acks: map[string]chan int{}}
	t.Cleanup(func() {
		for i := len(n.servers) - 1; i >= 0; i-- {
			n.servers[i]()
		}
		n.wg.Wait()
		teardownNet()
		lock.Close() // releases the flock
	})
	teardownNet() // leftovers of a crashed run (we hold the lock, so nobody else owns them)
	if err := setupNet(); err != nil {
		t.Fatalf("egresstest: %v", err)
	}
	dir := t.TempDir()
	if err := n.makeCerts(dir); err != nil {
		t.Fatalf("egresstest: certificates: %v", err)
	}
	n.defaultRecords(cfg.Records)
	if err := n.makeRepo(dir); err != nil {
		t.Fatalf("egresstest: git repository: %v", err)
	}
	if err := n.start(dir); err != nil {
		t.Fatalf("egresstest: start servers: %v", err)
	}
	return n
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func teardownNet() {
	exec.Command("ip", "route", "del", InternetPrefix, "dev", hostIf).Run()
	exec.Command("ip", "link", "del", hostIf).Run()
	exec.Command("ip", "netns", "del", InternetNS).Run()
}

func setupNet() error {
	steps := [][]string{
		{"netns", "add", InternetNS},
		{"link", "add", hostIf, "type", "veth", "peer", "name", peerIf, "netns", InternetNS},
		{"addr", "add", hostAddr, "dev", hostIf},
		{"link", "set", hostIf, "up"},
		{"-n", InternetNS, "link", "set", "lo", "up"},
		{"-n", InternetNS, "addr", "add", peerAddr, "dev", peerIf},
		{"-n", InternetNS, "link", "set", peerIf, "up"},
	}
	for _, ip := range []string{APIIP, GitIP, DNSIP, SinkIP} {
		steps = append(steps, []string{"-n", InternetNS, "addr", "add", ip + "/32", "dev", "lo"})
	}
	steps = append(steps,
		[]string{"-n", InternetNS, "route", "add", "default", "via", strings.TrimSuffix(hostAddr, "/30")},
		[]string{"route", "add", InternetPrefix, "via", peerIP, "dev", hostIf},
	)
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			return err
		}
	}
	// Every TCP and UDP port of the sink lands on its one listener (SO_ORIGINAL_DST keeps the port).
	rules := fmt.Sprintf(`table ip hxsink {
	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr %[1]s tcp dport != %[2]d dnat to %[1]s:%[2]d
		ip daddr %[1]s udp dport != %[2]d dnat to %[1]s:%[2]d
	}
}
`, SinkIP, sinkPort)
	cmd := exec.Command("ip", "netns", "exec", InternetNS, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %v: %s", InternetNS, err, out)
	}
	return nil
}

// inNS runs fn on a locked OS thread inside hxnet; sockets it opens stay there.
func (n *Internet) inNS(fn func() error) error { return netns.Do(n.NSPath, fn) }

// makeCerts creates the test CA and one leaf for example.test, *.example.test, api and git.
func (n *Internet) makeCerts(dir string) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "hxnet test CA", Organization: []string{"Hutch tests"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "example.test"},
		DNSNames:     []string{"example.test", "*.example.test"},
		IPAddresses:  []net.IP{net.ParseIP(APIIP), net.ParseIP(GitIP), net.ParseIP(SinkIP)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	n.cert = tls.Certificate{Certificate: [][]byte{leafDER, caDER}, PrivateKey: key}
	n.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	n.CAFile = filepath.Join(dir, "hxnet-ca.pem")
	n.CAPool = x509.NewCertPool()
	n.CAPool.AddCert(ca)
	return os.WriteFile(n.CAFile, n.CAPEM, 0o644)
}

func (n *Internet) tlsConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{n.cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
}

// start opens every listener inside hxnet, then serves them from ordinary goroutines.
func (n *Internet) start(dir string) error {
	var (
		apiHTTP, apiTLS, apiTCP, gitHTTP, gitTLS, sinkTCP, dnsTCP net.Listener
		sinkUDP, dnsUDP                                           net.PacketConn
	)
	err := n.inNS(func() error {
		var err error
		listen := func(addr string) net.Listener {
			if err != nil {
				return nil
			}
			var ln net.Listener
			ln, err = net.Listen("tcp4", addr)
			return ln
		}
		apiHTTP = listen(APIIP + ":80")
		apiTLS = listen(APIIP + ":443")
		apiTCP = listen(fmt.Sprintf("%s:%d", APIIP, TCPPort))
		gitHTTP = listen(GitIP + ":80")
		gitTLS = listen(GitIP + ":443")
		sinkTCP = listen(fmt.Sprintf("%s:%d", SinkIP, sinkPort))
		dnsTCP = listen(DNSIP + ":53")
		if err != nil {
			return err
		}
		if sinkUDP, err = net.ListenPacket("udp4", fmt.Sprintf("%s:%d", SinkIP, sinkPort)); err != nil {
			return err
		}
		dnsUDP, err = net.ListenPacket("udp4", DNSIP+":53")
		return err
	})
	if err != nil {
		for _, c := range []interface{ Close() error }{apiHTTP, apiTLS, apiTCP, gitHTTP, gitTLS, sinkTCP, dnsTCP, sinkUDP, dnsUDP} {
			if c != nil {
				c.Close()
			}
		}
		return err
	}
	api := n.apiHandler()
	n.serveHTTP(apiHTTP, api, false)
	n.serveHTTP(apiTLS, api, true)
	git := n.gitHandler(dir)
	n.serveHTTP(gitHTTP, git, false)
	n.serveHTTP(gitTLS, git, true)
	n.serveTCP(apiTCP)
	n.serveSink(sinkTCP, sinkUDP)
	return n.serveDNS(dnsUDP, dnsTCP)
}

func (n *Internet) serveHTTP(ln net.Listener, h http.Handler, useTLS bool) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	if useTLS {
		srv.TLSConfig = n.tlsConfig()
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if useTLS {
			srv.ServeTLS(ln, "", "")
			return
		}
		srv.Serve(ln)
	}()
	n.servers = append(n.servers, func() { srv.Close() })
}

func (n *Internet) serveDNS(pc net.PacketConn, ln net.Listener) error {
	h := mdns.HandlerFunc(n.answerDNS)
	for _, srv := range []*mdns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		errc := make(chan error, 1)
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			errc <- srv.ActivateAndServe()
		}()
		select {
		case <-started:
		case err := <-errc:
			return err
		}
		n.servers = append(n.servers, func() { srv.Shutdown() })
	}
	return nil
}

func (n *Internet) defaultRecords(extra map[string][]string) {
	set := func(name string, ips ...string) {
		var as []netip.Addr
		for _, ip := range ips {
			as = append(as, netip.MustParseAddr(ip))
		}
		n.records[strings.ToLower(name)] = as
	}
	set("example.test", APIIP)
	set("*.example.test", APIIP)
	set("git.example.test", GitIP)
	set("evil.example.test", SinkIP)
	set("*.evil.example.test", SinkIP)
	set("rebind.example.test", "10.0.0.1", "127.0.0.1", "169.254.169.254")
	set("v6only.example.test", "2001:db8::10")
	for name, ips := range extra {
		set(name, ips...)
	}
}

// SetRecord replaces name's A/AAAA records (IPv4 and IPv6 strings) in the DNS authority.
func (n *Internet) SetRecord(name string, ips ...string) {
	var as []netip.Addr
	for _, ip := range ips {
		as = append(as, netip.MustParseAddr(ip))
	}
	n.mu.Lock()
	n.records[strings.ToLower(strings.TrimSuffix(name, "."))] = as
	n.mu.Unlock()
}

func (n *Internet) lookup(name string) ([]netip.Addr, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if as, ok := n.records[name]; ok {
		return as, true
	}
	for i := strings.IndexByte(name, '.'); i >= 0; {
		if as, ok := n.records["*"+name[i:]]; ok {
			return as, true
		}
		j := strings.IndexByte(name[i+1:], '.')
		if j < 0 {
			break
		}
		i += j + 1
	}
	return nil, false
}

func (n *Internet) answerDNS(w mdns.ResponseWriter, r *mdns.Msg) {
	m := new(mdns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if len(r.Question) == 1 {
		q := r.Question[0]
		name := strings.TrimSuffix(strings.ToLower(q.Name), ".")
		n.mu.Lock()
		n.queries = append(n.queries, Query{Name: name, Type: mdns.TypeToString[q.Qtype]})
		n.mu.Unlock()
		as, ok := n.lookup(name)
		if !ok {
			m.Rcode = mdns.RcodeNameError
		}
		for _, a := range as {
			hdr := mdns.RR_Header{Name: q.Name, Class: mdns.ClassINET, Ttl: 60}
			switch {
			case a.Is4() && q.Qtype == mdns.TypeA:
				hdr.Rrtype = mdns.TypeA
				m.Answer = append(m.Answer, &mdns.A{Hdr: hdr, A: a.AsSlice()})
			case a.Is6() && q.Qtype == mdns.TypeAAAA:
				hdr.Rrtype = mdns.TypeAAAA
				m.Answer = append(m.Answer, &mdns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
			}
		}
	}
	w.WriteMsg(m)
}

// Queries returns the questions the DNS authority received so far.
func (n *Internet) Queries() []Query {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.queries)
}

// Asked reports whether the authority received a question for name (any type).
func (n *Internet) Asked(name string) bool {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	for _, q := range n.Queries() {
		if q.Name == name {
			return true
		}
	}
	return false
}

// AskedSuffix counts the questions for names equal to or under suffix.
func (n *Internet) AskedSuffix(suffix string) int {
	c := 0
	for _, q := range n.Queries() {
		if q.Name == suffix || strings.HasSuffix(q.Name, "."+suffix) {
			c++
		}
	}
	return c
}

// DNSAddr is the authority's address for resolvers ("198.51.100.53:53").
func (n *Internet) DNSAddr() string { return DNSIP + ":53" }

// Resolver returns a pure-Go resolver that sends every query to the authority (it still reads
// /etc/hosts first, like Go's default resolver).
func (n *Internet) Resolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, n.DNSAddr())
		},
	}
}

// SinkHits returns copies of what the evil sink received so far.
func (n *Internet) SinkHits() []SinkHit {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]SinkHit, len(n.sink))
	for i, h := range n.sink {
		out[i] = *h
		out[i].Data = slices.Clone(h.Data)
	}
	return out
}

// APIRequests returns the requests the api server handled so far (git requests are not
// included).
func (n *Internet) APIRequests() []APIRequest {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.requests)
}

// Uploaded returns the total body bytes /upload received.
func (n *Internet) Uploaded() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.uploaded
}

// OpenStreams returns how many /stream and /sse responses are being written right now.
func (n *Internet) OpenStreams() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.streams
}
