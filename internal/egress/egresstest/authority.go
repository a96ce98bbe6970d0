// Package egresstest holds test fixtures for hutchd's egress packages: a fake authoritative
// DNS server on loopback whose answers a test controls, and a resolver that uses it.
package egresstest

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	mdns "github.com/miekg/dns"
)

// Authority is an authoritative DNS server on 127.0.0.1 (UDP and TCP, same port) answering A
// queries from a fixed table and logging every query name it receives.
type Authority struct {
	Addr string // "127.0.0.1:port"

	records map[string][]netip.Addr

	mu sync.Mutex
	// queries are the names asked so far, canonical (lowercase, no trailing dot).
	queries []string
}

// NewAuthority starts an Authority answering records (name → IPv4 addresses as strings;
// names without a trailing dot) and stops it when t ends. Unknown names get NXDOMAIN.
func NewAuthority(t testing.TB, records map[string][]string) *Authority {
	t.Helper()
	a := &Authority{records: map[string][]netip.Addr{}}
	for name, ips := range records {
		for _, ip := range ips {
			a.records[strings.ToLower(name)] = append(a.records[strings.ToLower(name)], netip.MustParseAddr(ip))
		}
	}
	pc, ln := ListenUDPTCP(t)
	a.Addr = pc.LocalAddr().String()
	h := mdns.HandlerFunc(a.serve)
	udp := &mdns.Server{PacketConn: pc, Handler: h}
	tcp := &mdns.Server{Listener: ln, Handler: h}
	var wg sync.WaitGroup
	for _, srv := range []*mdns.Server{udp, tcp} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv.ActivateAndServe()
		}()
		<-started
	}
	t.Cleanup(func() {
		udp.Shutdown()
		tcp.Shutdown()
		wg.Wait()
	})
	return a
}

func (a *Authority) serve(w mdns.ResponseWriter, r *mdns.Msg) {
	m := new(mdns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if len(r.Question) == 1 {
		q := r.Question[0]
		name := strings.TrimSuffix(strings.ToLower(q.Name), ".")
		a.mu.Lock()
		a.queries = append(a.queries, name)
		a.mu.Unlock()
		ips, ok := a.records[name]
		switch {
		case !ok:
			m.Rcode = mdns.RcodeNameError
		case q.Qtype == mdns.TypeA:
			for _, ip := range ips {
				m.Answer = append(m.Answer, &mdns.A{
					Hdr: mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 60},
					A:   ip.AsSlice(),
				})
			}
		}
	}
	w.WriteMsg(m)
}

// Queries returns the names queried so far.
func (a *Authority) Queries() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.queries)
}

// Asked reports whether name was queried.
func (a *Authority) Asked(name string) bool { return slices.Contains(a.Queries(), name) }

// Resolver returns a pure-Go resolver that sends every query to a. It still reads /etc/hosts
// first, like the default resolver.
func (a *Authority) Resolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, a.Addr)
		},
	}
}

// ListenUDPTCP listens on one free port of 127.0.0.1 for both UDP and TCP, as a DNS server
// does. The kernel picks a free UDP port, whose TCP twin may be in use (seen in CI: "bind:
// address already in use"), so it tries up to 20 ports. The caller closes both.
func ListenUDPTCP(t testing.TB) (net.PacketConn, net.Listener) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("egresstest: listen udp: %v", err)
		}
		ln, err := net.Listen("tcp4", pc.LocalAddr().String())
		if err == nil {
			return pc, ln
		}
		pc.Close()
		if attempt == 20 {
			t.Fatalf("egresstest: listen tcp: %v", err)
		}
	}
}
