// Package dns is hutchd's DNS server for sandboxes: every UDP/TCP port-53 packet a sandbox
// sends is redirected here by the egress firewall, whatever resolver the sandbox named.
//
// Answers, for a query from a registered sandbox (identified by source address; anyone else
// gets REFUSED):
//
//	over the sandbox's rate limit           → REFUSED (token bucket per sandbox, Config.Rate/Burst; "limit" audit event)
//	name denied by policy or by name floor  → NXDOMAIN (+ EDE 15 "Blocked" with EDNS0); never resolved upstream
//	A for an operator upstream name, or a   → the sandbox's gateway address (the proxy routes by Host/SNI);
//	name only a handler/upstream rule serves   never resolved upstream
//	A for another name                      → hutchd's resolver (Go's, which reads /etc/hosts), minus every
//	                                          address in the floor; NXDOMAIN when none is left
//	AAAA, HTTPS, SVCB                       → NOERROR, no answers (sandboxes are IPv4-only; no ECH/h3 hints)
//	any other type (CNAME, TXT, MX, SRV, …) → NOERROR, no answers (NODATA): nothing but A is ever forwarded
//	non-QUERY opcodes, other classes        → NOTIMP / REFUSED
//
// A records carry a fixed TTL (AnswerTTL), because Go's resolver does not expose upstream TTLs.
// Answer addresses do not bind the proxy on ports 80/443: it re-resolves the name itself when
// it dials. For other ports, Config.OnAnswer feeds the proxy's pin table (address → names this
// sandbox resolved). Every answered query becomes an audit event (Config.Audit).
package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/blocked"
	"github.com/hutchdev/hutch/internal/egress/policy"
	mdns "github.com/miekg/dns"
)

// AnswerTTL is the TTL of every A record served, in seconds.
const AnswerTTL = 30

// resolveTimeout bounds one upstream resolution.
const resolveTimeout = 5 * time.Second

// Caps of TCP connections to the server (the listener passed to Start should be wrapped with
// them, internal/connlimit): each holds a descriptor in hutchd for up to the 10 s read timeout,
// and a sandbox may open them as fast as it likes. A resolver needs TCP only for answers that
// do not fit in UDP, a few at a time.
const (
	// MaxTCPConnsPerSandbox is how many TCP connections one sandbox (source address) may hold
	// open; past it its oldest is closed.
	MaxTCPConnsPerSandbox = 64
	// MaxTCPConns is how many all sandboxes together may hold open; past it the oldest is
	// closed.
	MaxTCPConns = 4096
)

// Config configures a Server. Identify and Floor are required.
type Config struct {
	// Identify maps a query's source address to its sandbox and that sandbox's gateway.
	Identify func(remote netip.Addr) (sandboxID string, gateway netip.Addr, ok bool)
	// IsUpstream reports whether a canonical name is an operator upstream; nil means none are.
	IsUpstream func(host string) bool
	// Policy is asked before any name is answered; nil means policy.AllowPublic.
	Policy policy.Policy
	// Floor filters resolved addresses.
	Floor *blocked.Floor
	// Resolver resolves allowed names; nil means net.DefaultResolver.
	Resolver *net.Resolver
	// Rate and Burst are the per-sandbox query rate limit (queries per second, bucket size);
	// 0 means DefaultRate and DefaultBurst.
	Rate  float64
	Burst int
	// Audit, when set, receives one event per query (kind dns) and per limited second (kind
	// limit). It must not block.
	Audit func(sandboxID string, e audit.Event)
	// OnAnswer, when set, is told the A records served to a sandbox for host (after the floor
	// filter), with their TTL.
	OnAnswer func(sandboxID, host string, ips []netip.Addr, ttl time.Duration)
}

// Server answers sandbox DNS on one UDP socket and one TCP listener.
type Server struct {
	cfg   Config
	log   *slog.Logger
	limit *limiter

	mu sync.Mutex
	// servers are the running miekg servers, set by Start.
	servers []*mdns.Server
	wg      sync.WaitGroup
}

// New returns a Server for cfg. It fails when Identify or Floor is nil.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	if cfg.Identify == nil || cfg.Floor == nil {
		return nil, errors.New("dns: Identify and Floor are required")
	}
	if cfg.Policy == nil {
		cfg.Policy = policy.AllowPublic{}
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.IsUpstream == nil {
		cfg.IsUpstream = func(string) bool { return false }
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Rate <= 0 {
		cfg.Rate = DefaultRate
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.Audit == nil {
		cfg.Audit = func(string, audit.Event) {}
	}
	return &Server{cfg: cfg, log: log, limit: newLimiter(cfg.Rate, cfg.Burst)}, nil
}

// Forget drops sandboxID's rate-limit state (the sandbox was removed).
func (s *Server) Forget(sandboxID string) { s.limit.forget(sandboxID) }

// audit emits the dns event for a finished answer.
func (s *Server) audit(id string, q mdns.Question, host string, m *mdns.Msg, decision, reason string) {
	s.cfg.Audit(id, audit.Event{Kind: audit.KindDNS, QName: host, QType: mdns.TypeToString[q.Qtype],
		Decision: decision, Reason: reason, Rcode: mdns.RcodeToString[m.Rcode], Answers: len(m.Answer)})
}

// Start serves on pc (UDP) and ln (TCP) until Close; it returns once both are serving. The
// Server takes ownership of pc and ln.
func (s *Server) Start(pc net.PacketConn, ln net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.servers != nil {
		return errors.New("dns: already started")
	}
	h := mdns.HandlerFunc(s.serveDNS)
	for _, srv := range []*mdns.Server{
		{PacketConn: pc, Handler: h, UDPSize: 4096},
		{Listener: ln, Handler: h, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: func() time.Duration { return 10 * time.Second }},
	} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		errc := make(chan error, 1)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			errc <- srv.ActivateAndServe()
		}()
		select {
		case <-started:
		case err := <-errc:
			return fmt.Errorf("dns: serve: %w", err)
		}
		s.servers = append(s.servers, srv)
	}
	return nil
}

// Close stops both servers and waits for their goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	servers := s.servers
	s.servers = nil
	s.mu.Unlock()
	var errs []error
	for _, srv := range servers {
		if err := srv.Shutdown(); err != nil {
			errs = append(errs, err)
		}
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

func (s *Server) serveDNS(w mdns.ResponseWriter, r *mdns.Msg) {
	m := s.answer(w.RemoteAddr(), r)
	if _, isUDP := w.RemoteAddr().(*net.UDPAddr); isUDP {
		size := mdns.MinMsgSize
		if o := r.IsEdns0(); o != nil {
			size = int(o.UDPSize())
		}
		m.Truncate(size)
	}
	if err := w.WriteMsg(m); err != nil {
		s.log.Debug("dns write", "err", err)
	}
}

func remoteAddr(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap()
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// answer builds the reply to r from remote.
func (s *Server) answer(remote net.Addr, r *mdns.Msg) *mdns.Msg {
	m := new(mdns.Msg)
	m.SetReply(r)
	m.RecursionAvailable = true
	edns := r.IsEdns0() != nil
	if edns {
		m.SetEdns0(4096, false)
	}
	id, gw, ok := s.cfg.Identify(remoteAddr(remote))
	if !ok {
		m.Rcode = mdns.RcodeRefused
		return m
	}
	if ok, notify := s.limit.allow(id, time.Now()); !ok {
		if notify {
			s.cfg.Audit(id, audit.Event{Kind: audit.KindLimit, Limit: "dns", Reason: fmt.Sprintf("more than %g queries per second", s.cfg.Rate)})
		}
		m.Rcode = mdns.RcodeRefused
		return m
	}
	if r.Opcode != mdns.OpcodeQuery {
		m.Rcode = mdns.RcodeNotImplemented
		return m
	}
	if len(r.Question) != 1 {
		m.Rcode = mdns.RcodeFormatError
		return m
	}
	q := r.Question[0]
	if q.Qclass != mdns.ClassINET {
		m.Rcode = mdns.RcodeRefused
		return m
	}
	log := s.log.With("sandbox_id", id, "name", q.Name, "qtype", mdns.TypeToString[q.Qtype])
	host, err := policy.CanonicalHost(q.Name)
	if err != nil {
		refuse(m, edns, "hutch egress: invalid name")
		s.audit(id, q, q.Name, m, "deny", "invalid name")
		return m
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout) //nolint:forbidigo // one DNS query, served by the DNS library's callback without a ctx
	defer cancel()
	upstream := s.cfg.IsUpstream(host)
	if blocked.DeniedName(host) && !upstream {
		refuse(m, edns, "hutch egress floor")
		log.Debug("dns blocked by name floor")
		s.audit(id, q, host, m, "deny", "address floor")
		return m
	}
	d := s.cfg.Policy.Decide(ctx, policy.Request{SandboxID: id, Kind: policy.KindDNS, Host: host, Upstream: upstream})
	if d.Action != policy.Allow {
		refuse(m, edns, "hutch egress policy")
		log.Debug("dns blocked by policy", "reason", d.Reason)
		s.audit(id, q, host, m, "deny", d.Reason)
		return m
	}
	if q.Qtype != mdns.TypeA {
		s.audit(id, q, host, m, "allow", "")
		return m // NODATA for AAAA, HTTPS, SVCB and everything else
	}
	if upstream || policy.SnapshotFor(s.cfg.Policy, id).Local(host) {
		m.Answer = append(m.Answer, aRecord(q.Name, gw))
		s.audit(id, q, host, m, "allow", "served by hutchd")
		return m
	}
	ips, err := s.cfg.Resolver.LookupNetIP(ctx, "ip4", host)
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			m.Rcode = mdns.RcodeNameError
		} else {
			m.Rcode = mdns.RcodeServerFailure
			log.Debug("dns resolve failed", "err", err)
		}
		s.audit(id, q, host, m, "allow", "")
		return m
	}
	seen := map[netip.Addr]bool{}
	for _, ip := range ips {
		ip = ip.Unmap()
		if seen[ip] || !ip.Is4() || s.cfg.Floor.Denied(ip) {
			continue
		}
		seen[ip] = true
		m.Answer = append(m.Answer, aRecord(q.Name, ip))
	}
	if len(m.Answer) == 0 {
		refuse(m, edns, "hutch egress floor: private answer")
		log.Debug("dns answer removed by floor", "answers", len(ips))
		s.audit(id, q, host, m, "deny", "rebind: every answer is in the address floor")
		return m
	}
	if s.cfg.OnAnswer != nil {
		served := make([]netip.Addr, 0, len(seen))
		for ip := range seen {
			served = append(served, ip)
		}
		s.cfg.OnAnswer(id, host, served, AnswerTTL*time.Second)
	}
	s.audit(id, q, host, m, "allow", "")
	return m
}

func aRecord(name string, ip netip.Addr) mdns.RR {
	return &mdns.A{
		Hdr: mdns.RR_Header{Name: name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: AnswerTTL},
		A:   ip.AsSlice(),
	}
}

// refuse turns m into NXDOMAIN, with Extended DNS Error 15 when the client speaks EDNS0.
func refuse(m *mdns.Msg, edns bool, text string) {
	m.Rcode = mdns.RcodeNameError
	m.Answer = nil
	if !edns {
		return
	}
	if o := m.IsEdns0(); o != nil {
		o.Option = append(o.Option, &mdns.EDNS0_EDE{InfoCode: mdns.ExtendedErrorCodeBlocked, ExtraText: text})
	}
}
