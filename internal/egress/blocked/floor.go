// Package blocked is the egress address floor: the destinations sandbox traffic may never reach,
// whatever a per-sandbox policy says (loopback, private, link-local, CGNAT, multicast, …, every
// address of the host's own interfaces, and every network those interfaces are directly
// connected to: the host's LAN neighbours and its router, whatever range they use).
//
// Only operator-declared upstreams (egress.Config.Upstreams) bypass the floor, and they do so
// by never being checked, not by an exemption here. The documentation ranges 192.0.2.0/24,
// 198.51.100.0/24 and 203.0.113.0/24 are deliberately not in the floor (test "internets" and
// the registries of the build hosts live there).
//
// Addresses are canonicalised before the check: IPv4-mapped IPv6 (::ffff:a.b.c.d), NAT64
// (64:ff9b::/96) and 6to4 (2002::/16) are decoded to the IPv4 address they carry.
package blocked

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Ranges is the static floor (EGRESS.md §2.5).
var Ranges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
}

// Names are host names denied outright (cloud metadata aliases that some resolvers answer).
var Names = []string{"metadata", "metadata.google.internal"}

var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixto4  = netip.MustParsePrefix("2002::/16")
	hostTTL = time.Second
)

// Floor checks addresses against Ranges, extra prefixes and the host's own addresses. The
// host's interface addresses are re-read at most once per second. A Floor is safe for
// concurrent use.
type Floor struct {
	extra []netip.Prefix

	mu sync.Mutex
	// host holds the host's interface addresses as of hostAt; nets the networks they are on.
	host   map[netip.Addr]bool
	nets   []netip.Prefix
	hostAt time.Time
}

// New returns a Floor denying Ranges, extra, and the host's own addresses.
func New(extra ...netip.Prefix) *Floor {
	return &Floor{extra: extra}
}

// Canonical unmaps ip and decodes NAT64 and 6to4 forms to the IPv4 address they carry; other
// addresses are returned unchanged (zone stripped).
func Canonical(ip netip.Addr) netip.Addr {
	ip = ip.WithZone("").Unmap()
	if !ip.Is6() {
		return ip
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	case sixto4.Contains(ip):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
	}
	return ip
}

// Denied reports whether ip is in the floor. Invalid addresses are denied.
func (f *Floor) Denied(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true
	}
	ip = Canonical(ip)
	for _, p := range Ranges {
		if p.Contains(ip) {
			return true
		}
	}
	for _, p := range f.extra {
		if p.Contains(ip) {
			return true
		}
	}
	if ip == netip.IPv4Unspecified() || ip.IsUnspecified() {
		return true
	}
	return f.isHost(ip)
}

// DeniedName reports whether the canonical host name is denied by name (see Names).
func DeniedName(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, n := range Names {
		if host == n {
			return true
		}
	}
	return false
}

func (f *Floor) isHost(ip netip.Addr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.host == nil || time.Since(f.hostAt) > hostTTL {
		f.host, f.nets = hostAddrs(f.host, f.nets)
		f.hostAt = time.Now()
	}
	if f.host[ip] {
		return true
	}
	for _, p := range f.nets {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// hostAddrs reads the host's interface addresses and the networks they are on (prefixes of /8
// or narrower; a /0 would deny everything); on failure it keeps the previous values.
func hostAddrs(prev map[netip.Addr]bool, prevNets []netip.Prefix) (map[netip.Addr]bool, []netip.Prefix) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		if prev == nil {
			return map[netip.Addr]bool{}, nil
		}
		return prev, prevNets
	}
	m := make(map[netip.Addr]bool, len(addrs))
	var nets []netip.Prefix
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		ip = Canonical(ip)
		m[ip] = true
		if ones, _ := ipn.Mask.Size(); ones >= 8 {
			nets = append(nets, netip.PrefixFrom(ip, ones).Masked())
		}
	}
	return m, nets
}
