// Package egress wires hutchd's sandbox egress path: the nftables table that redirects each
// sandbox's DNS, HTTP and HTTPS to hutchd and drops everything else (egress/firewall), the DNS
// server (egress/dns) and the transparent HTTP/TLS proxy (egress/proxy), all sharing one
// registry of sandboxes (host interface, gateway, address) and one Policy (egress/policy).
//
// Listeners bind 0.0.0.0 on DNSPort (UDP+TCP), HTTPPort, TLSPort and OtherPort (TCP to any
// other port, decided by the pin table of DNS answers and the sandbox's Spec.Ports): REDIRECT rewrites a
// sandbox packet's destination to the primary address of the interface it arrived on (its
// gateway), and the firewall keeps those ports unreachable from anywhere but loopback and
// redirected sandbox flows.
//
// Policies: per sandbox (SetPolicy; a policy.Registry), applied live: open connections a new
// policy no longer allows are closed. Every DNS query, connection and request is audited
// (Config.Audit).
//
// Destinations: any public name (the default Policy) plus the operator's Upstreams; never
// loopback, private, link-local, CGNAT, multicast or the host's own addresses (egress/floor).
// Sandboxes cannot reach each other, hutchd's API or any other host service.
//
// Lifecycle: New → Start (listeners, then the table, reconciled atomically) → AddSandbox /
// RemoveSandbox as sandboxes come and go → Close (listeners down, table removed).
package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"sync"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/connlimit"
	"github.com/hutchdev/hutch/internal/egress/audit"
	"github.com/hutchdev/hutch/internal/egress/blocked"
	"github.com/hutchdev/hutch/internal/egress/dns"
	"github.com/hutchdev/hutch/internal/egress/firewall"
	"github.com/hutchdev/hutch/internal/egress/policy"
	"github.com/hutchdev/hutch/internal/egress/proxy"
)

// Defaults for Config's zero fields.
const (
	DefaultDNSPort  = 15053
	DefaultHTTPPort = 15001
	DefaultTLSPort  = 15002
	DefaultTable    = "hutch"
	DefaultIfPrefix = "hsb"
)

// Config configures the Service. The zero value uses the defaults and no upstreams.
type Config struct {
	// Host listener ports; defaults 15053 (DNS, UDP+TCP), 15001 (HTTP), 15002 (TLS).
	DNSPort, HTTPPort, TLSPort int
	// OtherPort is the listener for sandbox TCP to any other port (allowed per policy by the
	// names hutchd's DNS served for the address; refused with RST otherwise); default
	// TLSPort+1 (15003); -1 disables it (such traffic is dropped).
	OtherPort int
	// Table is the nftables table name (family inet); default "hutch".
	Table string
	// IfPrefix is the host-side veth prefix; default "hsb". It must equal netns.Config.IfPrefix.
	IfPrefix string
	// Upstreams are operator routes: host name → "ip:port", reachable even when private (an
	// internal git server, say: "git.internal" → "127.0.0.1:8418"). Sandboxes resolve such a
	// name to their gateway; the proxy forwards HTTP (port 80) and TLS (port 443, spliced, not
	// decrypted) for it to that address, whatever port the sandbox used.
	Upstreams map[string]string
	// Resolver resolves sandbox destinations (DNS answers and proxy dials); nil is Go's default
	// resolver, which reads /etc/hosts first.
	Resolver *net.Resolver
	// DenyRanges are added to the address floor (blocked.Ranges, the host's own addresses and
	// the networks they are on): ranges an operator routes internally.
	DenyRanges []netip.Prefix
	// Audit receives the egress audit events (DNS queries, connections, requests, policy
	// changes, limits); nil discards them.
	Audit *audit.Log
	// DNSRate and DNSBurst are the per-sandbox DNS query rate limit (queries per second,
	// burst); 0 means dns.DefaultRate (200) and dns.DefaultBurst (500).
	DNSRate  float64
	DNSBurst int
	// Policy decides per sandbox and destination; nil is a *policy.Registry of per-sandbox
	// Specs (SetPolicy), where a sandbox without one gets allow-all (every public destination).
	// It never opens the address blocked.
	Policy policy.Policy
	// Intercept enables TLS interception and credential injection for hosts the Policy
	// decides Intercept (proxy.InterceptConfig); nil: such connections are refused.
	Intercept *proxy.InterceptConfig
	// MaxProxyConns caps the proxied connections of all sandboxes together (two descriptors
	// each); 0 or more than proxy.MaxConns means proxy.MaxConns. MaxDNSTCPConns caps the TCP
	// connections to the DNS server of all sandboxes together; 0 or more than dns.MaxTCPConns
	// means dns.MaxTCPConns. hutchd derives both from its RLIMIT_NOFILE.
	MaxProxyConns, MaxDNSTCPConns int
}

type sandbox struct {
	id      string
	hostIf  string
	gateway netip.Addr
	addr    netip.Addr
}

// Service runs the egress path. Its methods are safe for concurrent use.
type Service struct {
	cfg       Config
	log       *slog.Logger
	upstreams map[string]netip.AddrPort
	fw        *firewall.Firewall
	dns       *dns.Server
	proxy     *proxy.Proxy
	// registry holds per-sandbox policies; nil when Config.Policy is custom.
	registry *policy.Registry
	// pins is the other-port listener's pin table, filled by DNS answers.
	pins *proxy.Pins

	lifeMu sync.Mutex
	// lifecycle is 0 before Start, 1 after Start was called, 2 after Close.
	lifecycle int

	mu sync.RWMutex
	// byID and byAddr index the registered sandboxes.
	byID   map[string]*sandbox
	byAddr map[netip.Addr]*sandbox
	// started is true between a successful Start and Close.
	started bool
}

// New validates cfg and builds the Service without touching the system. Errors are
// errdefs.ErrInvalidArgument (bad names, ports, upstreams) or errdefs.ErrUnavailable (nft
// missing).
func New(cfg Config, log *slog.Logger) (*Service, error) {
	if cfg.DNSPort == 0 {
		cfg.DNSPort = DefaultDNSPort
	}
	if cfg.HTTPPort == 0 {
		cfg.HTTPPort = DefaultHTTPPort
	}
	if cfg.TLSPort == 0 {
		cfg.TLSPort = DefaultTLSPort
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if cfg.IfPrefix == "" {
		cfg.IfPrefix = DefaultIfPrefix
	}
	var reg *policy.Registry
	if cfg.Policy == nil {
		reg = policy.NewRegistry()
		cfg.Policy = reg
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.OtherPort == 0 {
		cfg.OtherPort = cfg.TLSPort + 1
	}
	otherPort := cfg.OtherPort
	if otherPort < 0 {
		otherPort = 0
	} else if otherPort == cfg.DNSPort || otherPort == cfg.HTTPPort || otherPort == cfg.TLSPort || otherPort > 65535 {
		return nil, fmt.Errorf("egress: other-port listener port %d must differ from the others: %w", otherPort, errdefs.ErrInvalidArgument)
	}
	if cfg.DNSPort == cfg.HTTPPort || cfg.DNSPort == cfg.TLSPort || cfg.HTTPPort == cfg.TLSPort {
		return nil, fmt.Errorf("egress: listener ports must differ: %w", errdefs.ErrInvalidArgument)
	}
	ups := make(map[string]netip.AddrPort, len(cfg.Upstreams))
	for name, addr := range cfg.Upstreams {
		host, err := policy.CanonicalHost(name)
		if err != nil || host != name {
			return nil, fmt.Errorf("egress: upstream name %q must be a canonical host name: %w", name, errdefs.ErrInvalidArgument)
		}
		ap, err := netip.ParseAddrPort(addr)
		if err != nil || ap.Port() == 0 {
			return nil, fmt.Errorf("egress: upstream %q address %q must be ip:port: %w", name, addr, errdefs.ErrInvalidArgument)
		}
		ups[name] = ap
	}
	fw, err := firewall.New(firewall.Config{Table: cfg.Table, IfPrefix: cfg.IfPrefix, DNSPort: cfg.DNSPort, HTTPPort: cfg.HTTPPort, TLSPort: cfg.TLSPort, OtherPort: otherPort}, log)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, log: log, upstreams: ups, fw: fw, byID: map[string]*sandbox{}, byAddr: map[netip.Addr]*sandbox{}, registry: reg, pins: proxy.NewPins()}
	fl := blocked.New(cfg.DenyRanges...)
	s.dns, err = dns.New(dns.Config{
		Identify:   s.identify,
		IsUpstream: func(h string) bool { _, ok := ups[h]; return ok },
		Policy:     cfg.Policy,
		Floor:      fl,
		Resolver:   cfg.Resolver,
		Rate:       cfg.DNSRate,
		Burst:      cfg.DNSBurst,
		Audit:      cfg.Audit.Emit,
		OnAnswer:   s.pins.Add,
	}, log)
	if err != nil {
		return nil, err
	}
	s.proxy, err = proxy.New(proxy.Config{
		Identify:  s.identify,
		Upstreams: ups,
		Policy:    cfg.Policy,
		Floor:     fl,
		Resolver:  cfg.Resolver,
		Mark:      firewall.GuardMark,
		MaxConns:  cfg.MaxProxyConns,
		Intercept: cfg.Intercept,
		Audit:     cfg.Audit.Emit,
		Pins:      s.pins,
	}, log)
	if err != nil {
		return nil, err
	}
	if reg != nil {
		reg.Watch(s.policyChanged)
	}
	return s, nil
}

// identify maps a sandbox address to its ID and gateway.
func (s *Service) identify(remote netip.Addr) (string, netip.Addr, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sb := s.byAddr[remote]
	if sb == nil {
		return "", netip.Addr{}, false
	}
	return sb.id, sb.gateway, true
}

// Start opens the listeners, then replaces the nftables table atomically (so a table left by a
// crashed hutchd is reconciled) with the sandboxes registered so far. On failure everything
// it opened is closed again. Start may be called once.
func (s *Service) Start(ctx context.Context) (err error) {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.lifecycle != 0 {
		return fmt.Errorf("egress: Start called twice or after Close: %w", errdefs.ErrFailedPrecondition)
	}
	s.lifecycle = 1
	var closers []func() error
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				_ = closers[i]() // err already says why the start failed
			}
		}
	}()
	var lc net.ListenConfig
	dnsAddr := fmt.Sprintf("0.0.0.0:%d", s.cfg.DNSPort)
	pc, err := lc.ListenPacket(ctx, "udp4", dnsAddr)
	if err != nil {
		return fmt.Errorf("egress: listen dns udp: %w", err)
	}
	dnsTCP, err := lc.Listen(ctx, "tcp4", dnsAddr)
	if err != nil {
		pc.Close()
		return fmt.Errorf("egress: listen dns tcp: %w", err)
	}
	// Sandboxes open TCP connections to the DNS server at will: capped per sandbox and in all
	// (the proxy's listeners cap theirs in proxy.admitConn, once the sandbox is identified).
	dnsTotal := dns.MaxTCPConns
	if s.cfg.MaxDNSTCPConns > 0 {
		dnsTotal = min(dnsTotal, s.cfg.MaxDNSTCPConns)
	}
	dnsTCP = connlimit.New("egress-dns", connlimit.Limits{PerAddr: dns.MaxTCPConnsPerSandbox, Total: dnsTotal}, s.log).Wrap(dnsTCP)
	if err := s.dns.Start(pc, dnsTCP); err != nil {
		pc.Close()
		dnsTCP.Close()
		return err
	}
	closers = append(closers, s.dns.Close)
	httpLn, err := lc.Listen(ctx, "tcp4", fmt.Sprintf("0.0.0.0:%d", s.cfg.HTTPPort))
	if err != nil {
		return fmt.Errorf("egress: listen http: %w", err)
	}
	closers = append(closers, s.proxy.Close)
	if err := s.proxy.StartHTTP(httpLn); err != nil {
		httpLn.Close()
		return err
	}
	tlsLn, err := lc.Listen(ctx, "tcp4", fmt.Sprintf("0.0.0.0:%d", s.cfg.TLSPort))
	if err != nil {
		return fmt.Errorf("egress: listen tls: %w", err)
	}
	if err := s.proxy.StartTLS(tlsLn); err != nil {
		tlsLn.Close()
		return err
	}
	if s.cfg.OtherPort > 0 {
		otherLn, err := lc.Listen(ctx, "tcp4", fmt.Sprintf("0.0.0.0:%d", s.cfg.OtherPort))
		if err != nil {
			return fmt.Errorf("egress: listen other ports: %w", err)
		}
		if err := s.proxy.StartOther(otherLn); err != nil {
			otherLn.Close()
			return err
		}
	}
	// Hold the registry lock across the apply so no AddSandbox falls between the snapshot and
	// started=true.
	s.mu.Lock()
	err = s.fw.Apply(ctx, s.elements())
	if err == nil {
		s.started = true
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "egress started", "table", s.cfg.Table, "dns_port", s.cfg.DNSPort,
		"http_port", s.cfg.HTTPPort, "tls_port", s.cfg.TLSPort, "upstreams", len(s.upstreams))
	return nil
}

// elements returns the anti-spoofing set, sorted; s.mu must be held.
func (s *Service) elements() []firewall.Sandbox {
	els := make([]firewall.Sandbox, 0, len(s.byID))
	for _, sb := range s.byID {
		els = append(els, firewall.Sandbox{HostIf: sb.hostIf, Addr: sb.addr})
	}
	sort.Slice(els, func(i, j int) bool { return els[i].HostIf < els[j].HostIf })
	return els
}

// Close stops the listeners (closing every proxied connection) and removes the nftables table.
// The Service cannot be restarted.
func (s *Service) Close() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	s.lifecycle = 2
	s.mu.Lock()
	s.started = false
	s.mu.Unlock()
	// Handlers call identify (s.mu), so nothing below runs under s.mu.
	errs := []error{s.proxy.Close(), s.dns.Close()}
	if err := s.fw.Remove(context.Background()); err != nil { //nolint:forbidigo // Close has no ctx
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// AddSandbox registers a sandbox: traffic from addr on hostIf is served (DNS answered for it
// with gateway, proxy connections accepted on gateway) and allowed past the anti-spoofing rule.
// Re-adding the same registration is a no-op. Errors: errdefs.ErrInvalidArgument for a bad
// id, interface or non-IPv4 address; errdefs.ErrConflict when id, hostIf or addr is registered
// differently.
func (s *Service) AddSandbox(ctx context.Context, id string, hostIf string, gateway, addr netip.Addr) error {
	if id == "" || hostIf == "" || !gateway.Is4() || !addr.Is4() {
		return fmt.Errorf("egress: invalid sandbox %q %q %s %s: %w", id, hostIf, gateway, addr, errdefs.ErrInvalidArgument)
	}
	sb := &sandbox{id: id, hostIf: hostIf, gateway: gateway, addr: addr}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.byID[id]; old != nil {
		if *old == *sb {
			return nil
		}
		return fmt.Errorf("egress: sandbox %s is registered as %s %s: %w", id, old.hostIf, old.addr, errdefs.ErrConflict)
	}
	if other := s.byAddr[addr]; other != nil {
		return fmt.Errorf("egress: address %s belongs to sandbox %s: %w", addr, other.id, errdefs.ErrConflict)
	}
	for _, other := range s.byID {
		if other.hostIf == hostIf {
			return fmt.Errorf("egress: interface %s belongs to sandbox %s: %w", hostIf, other.id, errdefs.ErrConflict)
		}
	}
	if s.started {
		if err := s.fw.AddSandbox(ctx, firewall.Sandbox{HostIf: hostIf, Addr: addr}); err != nil {
			return err
		}
	}
	s.byID[id] = sb
	s.byAddr[addr] = sb
	s.log.DebugContext(ctx, "egress sandbox added", "sandbox_id", id, "host_if", hostIf, "addr", addr)
	return nil
}

// RemoveSandbox unregisters id and closes its open proxied connections. Unknown ids are not an
// error.
func (s *Service) RemoveSandbox(ctx context.Context, id string) error {
	s.mu.Lock()
	sb := s.byID[id]
	if sb == nil {
		s.mu.Unlock()
		return nil
	}
	delete(s.byID, id)
	delete(s.byAddr, sb.addr)
	var err error
	if s.started {
		// Not cut short by ctx: the registry has already forgotten the sandbox, so a delete
		// cut half-way would leave its element in the set until the next Apply.
		err = s.fw.RemoveSandbox(context.WithoutCancel(ctx), firewall.Sandbox{HostIf: sb.hostIf, Addr: sb.addr})
	}
	s.mu.Unlock()
	s.proxy.ForgetSandbox(id)
	s.dns.Forget(id)
	s.pins.Forget(id)
	s.log.DebugContext(ctx, "egress sandbox removed", "sandbox_id", id)
	return err
}

// Config returns the effective configuration (defaults filled in).
func (s *Service) Config() Config { return s.cfg }
