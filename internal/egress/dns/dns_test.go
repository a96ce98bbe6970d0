package dns

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/hutchdev/hutch/internal/egress/blocked"
	"github.com/hutchdev/hutch/internal/egress/egresstest"
	"github.com/hutchdev/hutch/internal/egress/policy"
	mdns "github.com/miekg/dns"
)

// startServer runs a Server on 127.0.0.1 that treats 127.0.0.1 as sandbox "sb" with gateway
// 10.99.0.1 and nothing else as a sandbox.
func startServer(t *testing.T, auth *egresstest.Authority) string {
	t.Helper()
	srv, err := New(Config{
		Identify: func(a netip.Addr) (string, netip.Addr, bool) {
			if a == netip.MustParseAddr("127.0.0.1") {
				return "sb", netip.MustParseAddr("10.99.0.1"), true
			}
			return "", netip.Addr{}, false
		},
		IsUpstream: func(h string) bool { return h == "git.internal" },
		Policy: policy.Func(func(_ context.Context, r policy.Request) policy.Decision {
			if r.Host == "denied.test" {
				return policy.Decision{Reason: "test"}
			}
			return policy.Decision{Action: policy.Allow}
		}),
		Floor:    blocked.New(),
		Resolver: auth.Resolver(),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pc, ln := egresstest.ListenUDPTCP(t)
	if err := srv.Start(pc, ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return pc.LocalAddr().String()
}

func TestAnswers(t *testing.T) {
	auth := egresstest.NewAuthority(t, map[string][]string{
		"public.test":  {"203.0.113.7"},
		"mixed.test":   {"10.0.0.1", "203.0.113.9", "169.254.169.254"},
		"rebind.test":  {"127.0.0.1"},
		"denied.test":  {"203.0.113.8"},
		"metadata":     {"203.0.113.8"},
		"git.internal": {"203.0.113.8"},
	})
	addr := startServer(t, auth)

	tests := []struct {
		name    string
		qtype   uint16
		net     string
		rcode   int
		answers []string
		blocked bool // EDE 15 expected
	}{
		{"git.internal.", mdns.TypeA, "udp", mdns.RcodeSuccess, []string{"10.99.0.1"}, false},
		{"Git.Internal.", mdns.TypeA, "tcp", mdns.RcodeSuccess, []string{"10.99.0.1"}, false},
		{"git.internal.", mdns.TypeAAAA, "udp", mdns.RcodeSuccess, nil, false},
		{"public.test.", mdns.TypeA, "udp", mdns.RcodeSuccess, []string{"203.0.113.7"}, false},
		{"public.test.", mdns.TypeA, "tcp", mdns.RcodeSuccess, []string{"203.0.113.7"}, false},
		{"public.test.", mdns.TypeAAAA, "udp", mdns.RcodeSuccess, nil, false},
		{"public.test.", mdns.TypeHTTPS, "udp", mdns.RcodeSuccess, nil, false},
		{"public.test.", mdns.TypeSVCB, "udp", mdns.RcodeSuccess, nil, false},
		{"public.test.", mdns.TypeTXT, "udp", mdns.RcodeSuccess, nil, false},
		{"mixed.test.", mdns.TypeA, "udp", mdns.RcodeSuccess, []string{"203.0.113.9"}, false},
		{"rebind.test.", mdns.TypeA, "udp", mdns.RcodeNameError, nil, true},
		{"missing.test.", mdns.TypeA, "udp", mdns.RcodeNameError, nil, false},
		{"denied.test.", mdns.TypeA, "udp", mdns.RcodeNameError, nil, true},
		{"metadata.", mdns.TypeA, "udp", mdns.RcodeNameError, nil, true},
		{"localhost.", mdns.TypeA, "udp", mdns.RcodeNameError, nil, true}, // /etc/hosts → 127.0.0.1
	}
	for _, tt := range tests {
		m := new(mdns.Msg)
		m.SetQuestion(tt.name, tt.qtype)
		m.SetEdns0(1232, false)
		c := &mdns.Client{Net: tt.net}
		r, _, err := c.Exchange(m, addr)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.name, mdns.TypeToString[tt.qtype], err)
		}
		var got []string
		for _, rr := range r.Answer {
			if a, ok := rr.(*mdns.A); ok {
				got = append(got, a.A.String())
			}
		}
		if r.Rcode != tt.rcode || len(got) != len(tt.answers) || (len(got) > 0 && got[0] != tt.answers[0]) {
			t.Errorf("%s %s over %s = %s %v; want %s %v", tt.name, mdns.TypeToString[tt.qtype], tt.net,
				mdns.RcodeToString[r.Rcode], got, mdns.RcodeToString[tt.rcode], tt.answers)
		}
		var ede bool
		if o := r.IsEdns0(); o != nil {
			for _, opt := range o.Option {
				if e, ok := opt.(*mdns.EDNS0_EDE); ok && e.InfoCode == mdns.ExtendedErrorCodeBlocked {
					ede = true
				}
			}
		}
		if ede != tt.blocked {
			t.Errorf("%s %s: EDE Blocked = %v; want %v", tt.name, mdns.TypeToString[tt.qtype], ede, tt.blocked)
		}
	}
	// Denied names, upstream names and non-A types never reach the resolver.
	for _, name := range []string{"denied.test", "metadata", "git.internal"} {
		if auth.Asked(name) {
			t.Errorf("upstream resolver was asked for %s", name)
		}
	}
	for _, q := range auth.Queries() {
		if q == "public.test" {
			continue
		}
		if q != "mixed.test" && q != "rebind.test" && q != "missing.test" {
			t.Errorf("unexpected upstream query %q", q)
		}
	}
}

func TestUnknownSourceRefused(t *testing.T) {
	auth := egresstest.NewAuthority(t, map[string][]string{"public.test": {"203.0.113.7"}})
	addr := startServer(t, auth)
	m := new(mdns.Msg)
	m.SetQuestion("public.test.", mdns.TypeA)
	c := &mdns.Client{Net: "udp", Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP("127.0.0.2")}}}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != mdns.RcodeRefused || len(r.Answer) != 0 {
		t.Errorf("query from unknown source = %s %v; want REFUSED", mdns.RcodeToString[r.Rcode], r.Answer)
	}
	if auth.Asked("public.test") {
		t.Error("unknown source's query was resolved upstream")
	}
}
