// Package netns gives each sandbox its own named network namespace, joined to the host by a
// veth pair on a private /30.
//
// Layout for sandbox index i (Config.Subnet cut into /30s, the i-th one):
//
//	host netns                              sandbox netns (/var/run/netns/<NSPrefix><id>)
//	<IfPrefix><i>  gateway = base+1/30  ──  eth0  addr = base+2/30, default route via gateway
//	rp_filter=1, IPv6 disabled              lo up, IPv6 disabled
//
// IP forwarding is never touched: the sandbox reaches nothing but the host, where the egress
// firewall (internal/egress/firewall) redirects what it may use to hutchd's listeners.
//
// Named namespaces follow iproute2's convention (a bind mount of the namespace file under
// /var/run/netns, which is made a shared mount point), so `ip netns exec` and runc's
// NetNSPath both work with them. Setup and Teardown are idempotent, so a crashed hutchd can
// re-run them; List and ListLinks find leftovers.
package netns

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/sandboxid"
)

// RunDir is where named network namespaces are bind-mounted (iproute2's NETNS_RUN_DIR).
const RunDir = "/var/run/netns"

// Defaults for Config's zero fields.
const (
	DefaultIfPrefix = "hsb"
	DefaultNSPrefix = "hutch-"
)

// DefaultSubnet is the address pool for sandboxes when Config.Subnet is zero.
var DefaultSubnet = netip.MustParsePrefix("10.88.0.0/16")

// SandboxIf is the name of the sandbox-side interface inside its namespace.
const SandboxIf = "eth0"

// maxIfName is the longest interface name Linux accepts (IFNAMSIZ-1).
const maxIfName = 15

// Config configures a Manager. The zero value uses the defaults.
type Config struct {
	// IfPrefix prefixes host-side veth names ("<IfPrefix><index>"); default "hsb". The egress
	// firewall matches "<IfPrefix>*", so it must equal egress.Config.IfPrefix.
	IfPrefix string
	// NSPrefix prefixes namespace names: /var/run/netns/<NSPrefix><id>; default "hutch-".
	NSPrefix string
	// Subnet is the IPv4 pool cut into /30s, one per index; default 10.88.0.0/16. It must be
	// IPv4 with a prefix length of at most 30.
	Subnet netip.Prefix
}

// Net is one sandbox's network.
type Net struct {
	ID      string     // sandbox ID
	Index   int        // which /30 of the subnet
	NSPath  string     // /var/run/netns/<NSPrefix><ID>
	HostIf  string     // host-side veth, <IfPrefix><Index>
	Gateway netip.Addr // host side address (base+1); DNS and proxy answer here
	Addr    netip.Addr // sandbox address on eth0 (base+2)
}

// Manager creates and removes sandbox network namespaces. It holds no per-sandbox state: the
// kernel is the source of truth, so it is safe for concurrent use for different IDs (calls for
// the same ID must not overlap).
type Manager struct {
	cfg Config
	log *slog.Logger
}

// New validates cfg, fills defaults and returns a Manager. Errors are errdefs.ErrInvalidArgument.
func New(cfg Config, log *slog.Logger) (*Manager, error) {
	if cfg.IfPrefix == "" {
		cfg.IfPrefix = DefaultIfPrefix
	}
	if cfg.NSPrefix == "" {
		cfg.NSPrefix = DefaultNSPrefix
	}
	if !cfg.Subnet.IsValid() {
		cfg.Subnet = DefaultSubnet
	}
	cfg.Subnet = cfg.Subnet.Masked()
	if !cfg.Subnet.Addr().Is4() || cfg.Subnet.Bits() > 30 {
		return nil, fmt.Errorf("netns: subnet %s must be IPv4 and at most /30: %w", cfg.Subnet, errdefs.ErrInvalidArgument)
	}
	if len(cfg.IfPrefix) > 10 {
		return nil, fmt.Errorf("netns: interface prefix %q longer than 10 bytes: %w", cfg.IfPrefix, errdefs.ErrInvalidArgument)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, log: log}, nil
}

// Config returns the effective configuration (defaults filled in).
func (m *Manager) Config() Config { return m.cfg }

// Capacity returns how many /30s the subnet holds: valid indexes are 0 ≤ index < Capacity.
func Capacity(subnet netip.Prefix) int { return 1 << (30 - subnet.Bits()) }

// Addrs returns the gateway (base+1) and sandbox (base+2) addresses of the index-th /30 of
// subnet. It fails with errdefs.ErrInvalidArgument when subnet is not IPv4 or index is out
// of range.
func Addrs(subnet netip.Prefix, index int) (gateway, addr netip.Addr, err error) {
	subnet = subnet.Masked()
	if !subnet.Addr().Is4() || subnet.Bits() > 30 {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("netns: subnet %s must be IPv4 and at most /30: %w", subnet, errdefs.ErrInvalidArgument)
	}
	if index < 0 || index >= Capacity(subnet) {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("netns: index %d outside subnet %s (capacity %d): %w", index, subnet, Capacity(subnet), errdefs.ErrInvalidArgument)
	}
	b := subnet.Addr().As4()
	base := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	base += uint32(index) * 4
	at := func(v uint32) netip.Addr {
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return at(base + 1), at(base + 2), nil
}

func (m *Manager) nsName(id string) string { return m.cfg.NSPrefix + id }

// NSPath returns the bind-mount path of id's namespace (whether or not it exists).
func (m *Manager) NSPath(id string) string { return RunDir + "/" + m.nsName(id) }

// HostIf returns the host-side veth name for index.
func (m *Manager) HostIf(index int) string { return fmt.Sprintf("%s%d", m.cfg.IfPrefix, index) }

// checkID re-checks the sandbox ID grammar (internal/sandboxid), which keeps the namespace's
// path and names safe, whatever the caller checked.
func (m *Manager) checkID(id string) error {
	if err := sandboxid.CheckName(id); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	return nil
}

// errNotExist is returned internally when a namespace or link is absent.
var errNotExist = errors.New("does not exist")

// linkList lists the host's links. A dump the kernel interrupted (links changed while it was
// read, common when many sandboxes start at once) is read again, up to ten times.
func linkList() ([]netlink.Link, error) {
	var err error
	for range 10 {
		var links []netlink.Link
		links, err = netlink.LinkList()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return links, err
		}
	}
	return nil, fmt.Errorf("netns: list links: %w", err)
}
